-- /analytics/export (CONTRACT §4) is part of the Pro plan's analytics, like raw events.
UPDATE plans SET analytics = array_append(analytics, 'export')
 WHERE name = 'pro' AND NOT ('export' = ANY (analytics));
