import { shortId, type StoredSelection as Selection } from "../api";

/** The ranking components, stacked in each bar. */
export const COMPONENTS = [
  { key: "lexical", label: "Lexical (RRF)", color: "var(--c1)" },
  { key: "semantic", label: "Semantic (RRF)", color: "var(--c2)" },
  { key: "subject_boost", label: "Subject boost", color: "var(--c3)" },
  { key: "conversation_boost", label: "Conversation boost", color: "var(--c4)" },
  { key: "recency", label: "Recency", color: "var(--c5)" },
  { key: "period_boost", label: "Period boost", color: "var(--c7)" },
] as const;

/** Always-on is drawn apart from the bar: at 1.0 it would shrink every ranking component to a sliver. */
export const ALWAYS_ON = { label: "Always-on", color: "var(--c6)" } as const;

type Key = (typeof COMPONENTS)[number]["key"];

/** One component's contribution to the score: the reciprocal-rank part for lexical and semantic. */
function contribution(selection: Selection, key: Key): number {
  const c = selection.components;
  if (key === "lexical" || key === "semantic") return c[key]?.rrf ?? 0;
  return c[key] ?? 0;
}

/** A drawn segment: a component's value and its share of the bar area (0..1). */
export type Segment = { key: Key; label: string; color: string; value: number; fraction: number };

/** One chart row: the stacked ranking segments and, apart, the always-on contribution. */
export type ChartRow = { selection: Selection; segments: Segment[]; alwaysOn: number };

/**
 * The chart's geometry, without drawing: every bar is scaled to the largest sum of ranking
 * components (always-on excluded), so ranking components stay comparable between rows whatever
 * an always-on entry adds; always-on is reported per row, to be drawn beside the bar.
 */
export function chartRows(selections: Selection[]): ChartRow[] {
  const ranked = selections.map((selection) =>
    COMPONENTS.map((c) => ({ key: c.key, label: c.label, color: c.color, value: contribution(selection, c.key) })).filter(
      (s) => s.value > 0,
    ),
  );
  const scale = Math.max(0, ...ranked.map((segments) => segments.reduce((sum, s) => sum + s.value, 0)));
  return selections.map((selection, row) => ({
    selection,
    segments: ranked[row].map((s) => ({ ...s, fraction: scale > 0 ? s.value / scale : 0 })),
    alwaysOn: selection.components.always_on ?? 0,
  }));
}

/**
 * Score components per selected revision as stacked horizontal bars (SVG), all on one scale
 * (the largest ranking sum); an always-on contribution is a separate tag after the bar, and the
 * final score follows. Every segment and tag has a <title> for tooltips and screen readers.
 */
export function ScoreChart({ selections }: { selections: Selection[] }) {
  const rows = chartRows(selections);
  const rowHeight = 34;
  const labelWidth = 150;
  const width = 720;
  const tagWidth = 150;
  const barWidth = width - labelWidth - tagWidth - 70;
  const height = rows.length * rowHeight + 10;
  return (
    <figure className="chart" data-testid="score-chart">
      <svg
        viewBox={`0 0 ${width} ${height}`}
        width="100%"
        role="img"
        aria-label="Score components of each selected revision"
      >
        {rows.map(({ selection: s, segments, alwaysOn }, row) => {
          let x = labelWidth;
          const y = row * rowHeight + 6;
          const tagX = labelWidth + barWidth + 8;
          return (
            <g key={s.revision_id}>
              <text x={0} y={y + 16} className="chart-label">
                #{row + 1} rev {s.revision_number} · {shortId(s.entry_id)}
              </text>
              {segments.map((segment) => {
                const w = segment.fraction * barWidth;
                const rect = (
                  <rect key={segment.key} x={x} y={y} width={Math.max(w, 1)} height={22} fill={segment.color} rx={2}>
                    <title>
                      {segment.label}: {segment.value.toFixed(4)}
                    </title>
                  </rect>
                );
                x += w;
                return rect;
              })}
              {alwaysOn > 0 && (
                <g data-testid="always-on-tag">
                  <rect x={tagX} y={y} width={tagWidth - 8} height={22} fill={ALWAYS_ON.color} rx={11}>
                    <title>
                      {ALWAYS_ON.label}: {alwaysOn.toFixed(4)}
                    </title>
                  </rect>
                  <text x={tagX + 10} y={y + 16} className="chart-tag">
                    always-on +{alwaysOn.toFixed(2)}
                  </text>
                </g>
              )}
              <text x={tagX + tagWidth} y={y + 16} className="chart-value">
                {(s.score ?? 0).toFixed(4)}
              </text>
            </g>
          );
        })}
      </svg>
      <figcaption className="legend">
        {COMPONENTS.map((c) => (
          <span key={c.key}>
            <i style={{ background: c.color }} aria-hidden="true" /> {c.label}
          </span>
        ))}
        <span>
          <i style={{ background: ALWAYS_ON.color }} aria-hidden="true" /> {ALWAYS_ON.label} (drawn apart; bars share
          one scale without it)
        </span>
      </figcaption>
    </figure>
  );
}
