import type { StoredSelection as Selection } from "../api";

export const COMPONENTS = [
  { key: "lexical", label: "Lexical (RRF)", color: "var(--c1)" },
  { key: "semantic", label: "Semantic (RRF)", color: "var(--c2)" },
  { key: "subject_boost", label: "Subject boost", color: "var(--c3)" },
  { key: "conversation_boost", label: "Conversation boost", color: "var(--c4)" },
  { key: "recency", label: "Recency", color: "var(--c5)" },
  { key: "always_on", label: "Always-on", color: "var(--c6)" },
] as const;

type Key = (typeof COMPONENTS)[number]["key"];

/** One component's contribution to the score: the reciprocal-rank part for lexical and semantic. */
function contribution(selection: Selection, key: Key): number {
  const c = selection.components;
  if (key === "lexical" || key === "semantic") return c[key]?.rrf ?? 0;
  return c[key] ?? 0;
}

/**
 * Score components per selected revision as stacked horizontal bars (SVG): the bar's length is
 * the final score, each segment one named component. Every segment has a <title> for tooltips
 * and screen readers.
 */
export function ScoreChart({ selections }: { selections: Selection[] }) {
  const max = Math.max(0.0001, ...selections.map((s) => s.score ?? 0));
  const rowHeight = 34;
  const labelWidth = 150;
  const width = 720;
  const barWidth = width - labelWidth - 70;
  const height = selections.length * rowHeight + 10;
  return (
    <figure className="chart" data-testid="score-chart">
      <svg
        viewBox={`0 0 ${width} ${height}`}
        width="100%"
        role="img"
        aria-label="Score components of each selected revision"
      >
        {selections.map((s, row) => {
          let x = labelWidth;
          const y = row * rowHeight + 6;
          return (
            <g key={s.revision_id}>
              <text x={0} y={y + 16} className="chart-label">
                #{row + 1} rev {s.revision_number} · {s.entry_id.slice(0, 8)}
              </text>
              {COMPONENTS.map((c) => {
                const value = contribution(s, c.key);
                if (!value) return null;
                const w = (value / max) * barWidth;
                const rect = (
                  <rect key={c.key} x={x} y={y} width={Math.max(w, 1)} height={22} fill={c.color} rx={2}>
                    <title>
                      {c.label}: {value.toFixed(4)}
                    </title>
                  </rect>
                );
                x += w;
                return rect;
              })}
              <text x={x + 6} y={y + 16} className="chart-value">
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
      </figcaption>
    </figure>
  );
}
