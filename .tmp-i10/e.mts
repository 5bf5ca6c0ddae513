import { openEmbedded } from '../src/store/embedded.js';
const db = await openEmbedded(undefined);
console.log(await db.query('SELECT 1 AS x'));
try { console.log(await db.query('SELECT pg_terminate_backend(pg_backend_pid())')); } catch (e) { console.log('err1', (e as Error).message); }
try { console.log(await db.query('SELECT 2 AS x')); } catch (e) { console.log('err2', (e as Error).message); }
await db.close();
