import { describe, expect, it } from "vitest";
import { diffWords } from "./diff";

describe("diffWords", () => {
  it("marks replaced words as removed then added and keeps the rest", () => {
    expect(diffWords("Leads the payments team.", "Leads the platform team.")).toEqual([
      { kind: "same", text: "Leads the " },
      { kind: "removed", text: "payments" },
      { kind: "added", text: "platform" },
      { kind: "same", text: " team." },
    ]);
  });

  it("handles empty sides", () => {
    expect(diffWords("", "new words")).toEqual([{ kind: "added", text: "new words" }]);
    expect(diffWords("old", "")).toEqual([{ kind: "removed", text: "old" }]);
    expect(diffWords("same", "same")).toEqual([{ kind: "same", text: "same" }]);
  });
});
