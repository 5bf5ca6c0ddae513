/** Pure Ink components: they draw the lines layout.ts computed, nothing else. */
import { Box, Text } from 'ink';
import type { Figures } from './derive.js';
import { frameLines, type FrameState, type Line } from './layout.js';

export function Frame({ lines, color }: { lines: Line[]; color: boolean }) {
  return (
    <Box flexDirection="column">
      {lines.map((line, i) => (
        <Text key={i} wrap="truncate">
          {line.map((s, j) =>
            color ? (
              <Text key={j} color={s.color} bold={s.bold} dimColor={s.dim}>
                {s.text}
              </Text>
            ) : (
              s.text
            ),
          )}
        </Text>
      ))}
    </Box>
  );
}

export function TopView({ figures, state, color }: { figures: Figures; state: FrameState; color: boolean }) {
  return <Frame lines={frameLines(figures, state)} color={color} />;
}
