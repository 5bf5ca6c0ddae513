/** The live view: polls the data module every interval and draws the figures; keys. */
import { useApp, useInput, useStdout } from 'ink';
import { useCallback, useEffect, useRef, useState } from 'react';
import type { TopData } from './data.js';
import type { Figures } from './derive.js';
import { TopView } from './view.js';

const oneLine = (err: unknown) => String((err as Error).message ?? err).replace(/\s+/g, ' ');

export function TopApp({
  data,
  initial,
  intervalS,
  color,
}: {
  data: TopData;
  initial: Figures;
  intervalS: number;
  color: boolean;
}) {
  const { exit } = useApp();
  const { stdout } = useStdout();
  const size = () => ({ width: stdout.columns || 80, height: stdout.rows || 24 });
  const [dims, setDims] = useState(size);
  const [figures, setFigures] = useState(initial);
  const [paused, setPaused] = useState(false);
  const [help, setHelp] = useState(false);
  const [error, setError] = useState<string>();
  // One data operation at a time: a key press never interleaves with a refresh in flight.
  const queue = useRef<Promise<void>>(Promise.resolve());
  const mounted = useRef(true);
  useEffect(() => () => void (mounted.current = false), []);

  const refresh = useCallback(
    (before?: () => Promise<void> | void) => {
      const run = async () => {
        try {
          await before?.();
          const f = await data.refresh();
          if (mounted.current) {
            setFigures(f);
            setError(undefined);
          }
        } catch (err) {
          if (mounted.current) setError(oneLine(err));
        }
      };
      queue.current = queue.current.then(run);
      return queue.current;
    },
    [data],
  );

  useEffect(() => {
    const onResize = () => setDims(size());
    stdout.on('resize', onResize);
    return () => void stdout.off('resize', onResize);
  }, [stdout]);

  useEffect(() => {
    if (paused) return;
    let timer: NodeJS.Timeout | undefined;
    let stopped = false;
    // A timeout chain, not an interval: a slow refresh never piles up behind itself.
    const tick = () =>
      void refresh().then(() => {
        if (!stopped) timer = setTimeout(tick, intervalS * 1000);
      });
    timer = setTimeout(tick, intervalS * 1000);
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [paused, refresh, intervalS]);

  useInput((input, key) => {
    if (input === 'q' || (key.ctrl && input === 'c')) return exit();
    if (help) return setHelp(false);
    if (input === '?') setHelp(true);
    else if (input === 'p') setPaused((p) => !p);
    else if (input === 't') void refresh(() => data.nextTagKey());
    else if (input === 'a') void refresh(() => data.nextAccount());
  });

  return <TopView figures={figures} state={{ ...dims, paused, help, error }} color={color} />;
}
