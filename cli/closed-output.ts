/**
 * `meter top | head`: the reader closes the pipe and the next write fails with EPIPE. As with
 * `git log | head`, that is not an error: further output is dropped, a long-running command
 * (top's batch frames, the daemon) is asked to stop as SIGTERM would, and the exit status stays 0.
 */
export function endQuietlyOnClosedOutput(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE') throw err;
      stream.write = (() => true) as typeof stream.write;
      if (stream === process.stdout) process.emit('SIGTERM', 'SIGTERM');
    });
  }
}
