// Real-window end-to-end suite of the operator console: the built Tauri app under Xvfb, driven
// by tauri-driver + WebKitWebDriver over the W3C WebDriver protocol, against a real seeded
// PostgreSQL (see scripts/test-console.sh, which seeds it and runs this under xvfb-run).
//
// Environment: CONSOLE_APP (app binary), TAURI_DRIVER (tauri-driver binary), FIXTURE (the
// e2e_fixture binary, for SQL checks), FIXTURE_JSON (ids printed by `e2e_fixture seed`),
// SCREENSHOT_DIR (where each view's screenshot goes; taken with `import -window root`).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { screenshot as screenshotTo, sleep, startDriver, waitFor } from "./webdriver.mjs";

const APP = process.env.CONSOLE_APP;
const DRIVER = process.env.TAURI_DRIVER;
const FIXTURE = process.env.FIXTURE;
const ids = JSON.parse(process.env.FIXTURE_JSON ?? "{}");
const SHOTS = process.env.SCREENSHOT_DIR ?? "target/console-screenshots";
const OPERATOR = "ops_alice";
const OPERATOR_PASSWORD = "correct-horse-battery";

/** The WebDriver client (ui/e2e/webdriver.mjs), shared with the package suite. */
let driver;
const find = (css, timeoutMs) => driver.find(css, timeoutMs);
const count = (css) => driver.count(css);
const click = (css) => driver.click(css);
const type = (css, value) => driver.type(css, value);
const text = (css) => driver.text(css);
const script = (source, args = []) => driver.script(source, args);
const choose = (css, value) => driver.choose(css, value);
const clear = (css) => driver.clear(css);

async function waitText(css, expected) {
  return waitFor(`${css} to contain ${expected}`, async () => ((await text(css)).includes(expected) ? true : null));
}

function screenshot(name) {
  screenshotTo(SHOTS, name);
}

/** Runs an e2e_fixture subcommand (SQL checks and changes behind the window's back); its JSON. */
function fixture(...args) {
  return JSON.parse(execFileSync(FIXTURE, args, { encoding: "utf8" }).trim().split("\n").pop());
}

const sqlGrant = (requestId) => fixture("grant", requestId);

/** Opens an entry from the memory browser by its id. */
async function openEntry(entry) {
  await click('[data-testid="nav-memory"]');
  await clear('[data-testid="memory-search"]');
  await type('[data-testid="memory-search"]', entry);
  await waitFor("filtered list", async () => (await count('[data-testid="memory-table"] tbody tr')) === 1);
  await click(`tr[data-row-id="${entry}"] td:nth-child(2)`);
  await find('[data-testid="entry-detail"]');
}

const enabled = async (css) => driver.request("GET", `/session/${driver.session}/element/${await find(css)}/enabled`);

test("operator console, end to end in a real window", { timeout: 480000 }, async (t) => {
  t.afterEach((sub) => {
    if (sub.passed === false) {
      try {
        screenshot(`failed-${sub.name.replace(/[^a-z0-9]+/gi, "-").slice(0, 60)}`);
      } catch {
        // no screen to capture
      }
    }
  });
  assert.ok(APP && DRIVER && FIXTURE && ids.request_id, "CONSOLE_APP, TAURI_DRIVER, FIXTURE and FIXTURE_JSON are required");
  driver = await startDriver(DRIVER);
  t.after(() => driver.quit());
  await driver.launch(APP);

  await t.test("without DATABASE_URL the console opens on the connection screen", async () => {
    await find('[data-testid="connection-screen"]', 60000);
    screenshot("00-connection-screen");
    await click('[data-testid="connect-demo"]');
  });

  await t.test("first run creates the operator role and signs in", async () => {
    await find('form[aria-label="Create operator role"]', 60000);
    await type('input[name="role"]', OPERATOR);
    await type('input[name="password"]', OPERATOR_PASSWORD);
    await type('input[name="confirm"]', OPERATOR_PASSWORD);
    screenshot("01-first-run-sign-in");
    await click('button[type="submit"]');
    await waitText('[data-testid="session-role"]', OPERATOR);
    assert.match(await text('[data-testid="session-role"]'), /operator/);
  });

  await t.test("memory browser lists the seeded entries", async () => {
    await find('[data-testid="memory-table"] tbody tr');
    assert.ok((await count('[data-testid="memory-table"] tbody tr')) >= 8);
    screenshot("02-memory-browser");
  });

  await t.test("an entry's revision history shows the body diff", async () => {
    await type('[data-testid="memory-search"]', ids.amended_entry);
    await waitFor("filtered list", async () => (await count('[data-testid="memory-table"] tbody tr')) === 1);
    await click(`tr[data-row-id="${ids.amended_entry}"] td:nth-child(2)`);
    await find('[data-testid="revision-2"]');
    const diff = await text('[data-testid="revision-2"] [data-testid="body-diff"]');
    assert.match(diff, /platform/);
    assert.ok((await count('[data-testid="revision-2"] ins')) > 0, "additions are marked");
    // Each revision says the day it was learned, as the memory line says it to models.
    const learned = await text('[data-testid="revision-2"] [data-testid="learned-at"]');
    assert.match(learned, /Learned \d{1,2} [A-Z][a-z]+ \d{4}/);
    screenshot("03-entry-history");
  });

  await t.test("its lineage graph shows sources with audience evidence", async () => {
    await click('[data-testid="tab-lineage"]');
    await waitFor("graph nodes", async () => (await count('[data-testid="lineage-graph"] .react-flow__node')) >= 2);
    const lineage = await text('ul[aria-label="Lineage sources"]');
    assert.match(lineage, /audience: /);
    await sleep(500);
    screenshot("04-entry-lineage");
  });

  await t.test("a retrieval event shows its score components", async () => {
    await click('[data-testid="nav-events"]');
    await click(`tr[data-row-id="${ids.event_id}"] td:nth-child(2)`);
    await find('[data-testid="event-detail"]');
    await waitFor("chart bars", async () => (await count('[data-testid="score-chart"] rect')) > 0);
    assert.match(await text('[data-testid="selection-learned-at"]'), /^\d{1,2} [A-Z][a-z]+ \d{4}$/);
    // Each bar is labelled with its entry's short id (the last 12 hex digits), as every other view.
    const labels = await script(
      "return [...document.querySelectorAll('[data-testid=\"score-chart\"] text.chart-label')].map((l) => l.textContent);",
    );
    assert.ok(labels.length > 0, "the chart labels its bars");
    for (const label of labels) assert.match(label, /^#\d+ rev \d+ · …[0-9a-f]{12}$/);
    assert.equal(new Set(labels.map((l) => l.split("…")[1])).size, labels.length, "one entry per bar, told apart");
    screenshot("05-retrieval-event");
  });

  await t.test("explain names the deciding rule", async () => {
    await click('[data-testid="nav-explain"]');
    await waitFor("entry options", async () => (await count('[data-testid="explain-entry"] option')) > 1);
    await waitFor("conversation options", async () => (await count('[data-testid="explain-conversation"] option')) > 1);
    await choose('[data-testid="explain-entry"]', ids.withheld_entry);
    await choose('[data-testid="explain-conversation"]', ids.engineering);
    await click('section[aria-labelledby="explain-title"] button[type="submit"]');
    await waitText('[data-testid="explain-verdict"]', "unknown_evidence");
    screenshot("06-explain");
  });

  await t.test("evidence review lists the withheld revision", async () => {
    await click('[data-testid="nav-review"]');
    await find('[data-testid="review-table"] tbody tr');
    assert.match(await text('[data-testid="review-table"]'), /budget review/);
    screenshot("07-evidence-review");
  });

  await t.test("the operator marks the proven audience of an unknown source; the lineage shows it", async () => {
    const before = fixture("evidence", ids.withheld_revision);
    assert.equal(before.length, 1);
    assert.equal(before[0].evidence, "unknown");
    await click(`tr[data-row-id="${ids.withheld_revision}"] td:nth-child(2)`);
    const form = `[data-testid="review-source-${before[0].source}"]`;
    await find(form);
    assert.equal(await enabled(`${form} [data-testid="review-submit"]`), false, "nothing chosen yet");
    await click(`${form} [data-testid="audience-${ids.victor}"]`);
    await type(`${form} [data-testid="review-note"]`, "Victor confirmed the thread was only between us.");
    screenshot("07a-evidence-review-form");
    await click(`${form} [data-testid="review-submit"]`);
    await waitText('[data-testid="review-result"]', `reviewed by ${OPERATOR}`);
    screenshot("07b-evidence-reviewed");
    const [after] = fixture("evidence", ids.withheld_revision);
    assert.equal(after.evidence, "known");
    assert.deepEqual(after.audience, [ids.victor]);
    assert.equal(after.basis, `operator review by ${OPERATOR}`);
    assert.deepEqual(after.operator_actions, [`${OPERATOR}:review_source_evidence`]);
    await click('[data-testid="open-reviewed-lineage"]');
    await find('[data-testid="lineage-panel"]');
    const lineage = await text('ul[aria-label="Lineage sources"]');
    assert.match(lineage, /audience: Victor \(id U123\)/);
    assert.match(lineage, new RegExp(`operator review by ${OPERATOR}`));
    assert.doesNotMatch(lineage, /UNKNOWN/);
    await sleep(500);
    screenshot("07c-reviewed-lineage");
  });

  await t.test("the operator approves the pending request; SQL records the role", async () => {
    await click('[data-testid="nav-sharing"]');
    const card = `[data-testid="request-${ids.request_id}"]`;
    await find(card);
    assert.ok((await text(`${card} [data-testid="proposed-audience"]`)).length > 0);
    // Alex's own words: the request waits for his confirmation (or an operator's decision).
    assert.match(await text(`${card} [data-testid="missing-voices"]`), /^Alex \(id U790\) to confirm/);
    await type(`${card} [data-testid="decision-reason"]`, "Alex asked for this in a direct message; verified.");
    screenshot("08-sharing-queue");
    await click(`${card} [data-testid="approve"]`);
    await waitText('[data-testid="decision-result"]', `approved by ${OPERATOR}`);
    screenshot("09-sharing-approved");
    const grant = sqlGrant(ids.request_id);
    assert.ok(grant, "a live grant exists for the request");
    assert.equal(grant.approved_by_role, OPERATOR);
    assert.equal(grant.operator_log_role, OPERATOR);
    assert.equal(grant.authority, "operator_approval");
    assert.ok(grant.audience.length > 0);
  });

  await t.test("stale approvals are refused with a clear message and nothing is written", async () => {
    // The queue has refreshed after the approval above; from here on it changes only on a decision.
    await waitFor("the approved request to leave the queue", async () => (await count(`[data-testid="request-${ids.request_id}"]`)) === 0);
    const cases = [
      { name: "amended", change: ["amend", ids.stale.amended.entry], expect: "amended or forgotten" },
      { name: "forgotten", change: ["forget", ids.stale.forgotten.entry], expect: "amended or forgotten" },
      {
        name: "decided_elsewhere",
        change: ["approve-as-other-operator", ids.stale.decided_elsewhere.request],
        expect: `already decided (approved by ${ids.other_operator})`,
      },
    ];
    for (const [index, c] of cases.entries()) {
      const request = ids.stale[c.name].request;
      const card = `[data-testid="request-${request}"]`;
      await type(`${card} [data-testid="decision-reason"]`, "Alex asked for this; approving.");
      const before = fixture("request", request);
      assert.equal(before.state, "pending", `${c.name} starts pending`);
      fixture(...c.change); // behind the console's back: its card still offers Approve
      assert.equal(await enabled(`${card} [data-testid="approve"]`), true, `${c.name}: the queue has not refreshed yet`);
      await click(`${card} [data-testid="approve"]`);
      const refused = `[data-testid="decision-refused"][data-request-id="${request}"]`;
      await waitText(refused, "was not approved");
      const message = await text(refused);
      assert.ok(message.includes(c.expect), `${c.name}: ${message}`);
      assert.match(message, /nothing was written/);
      screenshot(`09${"abc"[index]}-refused-${c.name.replace("_", "-")}`);
      const after = fixture("request", request);
      if (c.name === "decided_elsewhere") {
        assert.deepEqual(
          [after.state, after.decided_by, after.grants, after.operator_actions],
          ["approved", ids.other_operator, 1, [`${ids.other_operator}:approve_sharing`]],
          "only the other operator's approval is recorded",
        );
        await waitFor("the decided request to leave the queue", async () => (await count(card)) === 0);
      } else {
        assert.deepEqual([after.state, after.decided_by, after.grants, after.operator_actions], ["pending", null, 0, []]);
        await waitText(card, "revision no longer current");
        assert.equal(await enabled(`${card} [data-testid="approve"]`), false, "the refreshed card cannot approve");
      }
    }
  });

  await t.test("the operator revokes an MCP access token with a reason; SQL records the role", async () => {
    const before = fixture("token", ids.token_id);
    assert.deepEqual([before.revoked_at, before.operator_actions], [null, [ids.token_issue]], "its issue is audited");
    await click('[data-testid="nav-tokens"]');
    const row = `[data-testid="tokens-table"] tr[data-row-id="${ids.token_id}"]`;
    await waitText(row, "Priya (id U456)");
    const listed = await text(row);
    for (const shown of ["mesh-assistant", "#engineering", "Priya's laptop (Claude Desktop)", "never", "live"]) {
      assert.ok(listed.includes(shown), `the row shows ${shown}: ${listed}`);
    }
    await click(`${row} td:nth-child(2)`);
    const panel = `[data-testid="token-panel-${ids.token_id}"]`;
    await find(panel);
    assert.equal(await enabled(`${panel} [data-testid="revoke-submit"]`), false, "no reason yet");
    const reason = "Priya's laptop was lost; issue a new token.";
    await type(`${panel} [data-testid="revoke-reason"]`, reason);
    screenshot("09d-access-tokens");
    await click(`${panel} [data-testid="revoke-submit"]`);
    await waitText('[data-testid="revoke-result"]', `revoked by ${OPERATOR}`);
    await waitText(`${row} [data-testid="token-state"]`, "revoked");
    await find(`${panel} [data-testid="token-revoked-at"]`);
    assert.equal(await count(`${panel} [data-testid="revoke-submit"]`), 0, "a revoked token offers no revocation");
    screenshot("09e-access-token-revoked");
    const after = fixture("token", ids.token_id);
    assert.ok(after.revoked_at, "revoked_at is set");
    assert.deepEqual(after.operator_actions, [ids.token_issue, `${OPERATOR}:revoke_access_token:${reason}`]);
  });

  await t.test("a session the database stops accepting returns to sign-in and keeps what was typed", async () => {
    await click('[data-testid="nav-sharing"]');
    const card = '[data-testid^="request-"]';
    await find(card);
    const typed = "Checked with Priya on a call; waiting for her go-ahead.";
    await type(`${card} [data-testid="decision-reason"]`, typed);
    // The role's password expires and its connections are ended, as an administrator would.
    fixture("expire-role", OPERATOR);
    await click(`${card} [data-testid="deny"]`);
    await waitText('[data-testid="session-ended"]', `Your session as ${OPERATOR} ended`);
    screenshot("09c-session-ended");
    assert.equal(await script("return document.querySelector('input[name=\"role\"]').value;"), OPERATOR);
    fixture("restore-role", OPERATOR);
    await type('[role="dialog"] input[name="password"]', OPERATOR_PASSWORD);
    await click('[role="dialog"] button[type="submit"]');
    await waitFor("the sign-in dialog to close", async () => (await count('[role="dialog"]')) === 0);
    const kept = await script(`return document.querySelector('${card} [data-testid="decision-reason"]').value;`);
    assert.equal(kept, typed, "the typed reason survived the sign-in");
    screenshot("09d-session-restored");
  });

  await t.test("dark theme renders", async () => {
    // A toggle: if a click is lost (or delivered twice) under Xvfb, click again until it is dark.
    await waitFor("dark theme", async () => {
      await click('[data-testid="theme-toggle"]');
      await sleep(1500);
      return (await text('[data-testid="theme-toggle"]')).includes("Light");
    }, 15000);
    const theme = await script("return document.documentElement.getAttribute('data-theme');");
    assert.equal(theme, "dark");
    await click('[data-testid="nav-memory"]');
    await find('[data-testid="memory-table"] tbody tr');
    screenshot("10-dark-theme");
  });

  await t.test("a role without operator rights can browse but not approve, and is told why", async () => {
    await click('[data-testid="sign-out"]');
    await find('form[aria-label="Sign in"]');
    await type('input[name="role"]', ids.reader_role);
    await type('input[name="password"]', ids.reader_password);
    await click('button[type="submit"]');
    await waitText('[data-testid="session-role"]', "read-only");
    await find('[data-testid="memory-table"] tbody tr');
    await click('[data-testid="nav-sharing"]');
    await waitText('[data-testid="approve-limitation"]', "not a member of mesh_operator");
    screenshot("11-read-only-role");
  });

  await t.test("a read-only reviewer sees the evidence review action disabled, and nothing is written", async () => {
    await click('[data-testid="nav-review"]');
    await waitText('[data-testid="review-role-limitation"]', "not a member of mesh_operator");
    await click(`tr[data-row-id="${ids.still_withheld_revision}"] td:nth-child(2)`);
    const [source] = fixture("evidence", ids.still_withheld_revision);
    const form = `[data-testid="review-source-${source.source}"]`;
    await waitText(`${form} [data-testid="review-limitation"]`, "not a member of mesh_operator");
    assert.equal(await enabled(`${form} [data-testid="review-submit"]`), false);
    assert.equal(await enabled(`${form} [data-testid="review-note"]`), false);
    assert.equal(await enabled(`${form} [data-testid="audience-${ids.victor}"]`), false);
    screenshot("12-read-only-evidence-review");
    const [after] = fixture("evidence", ids.still_withheld_revision);
    assert.deepEqual([after.evidence, after.operator_actions], ["unknown", []]);
  });

  await t.test("a read-only role sees Erase disabled, and is told why", async () => {
    await openEntry(ids.stale.amended.entry);
    await waitText('[data-testid="erase-limitation"]', "not a member of mesh_eraser");
    assert.equal(await enabled('[data-testid="erase-entry"]'), false);
    assert.equal(await enabled('[data-testid="erase-person"]'), false);
    const why = await script("return document.querySelector('[data-testid=\"erase-person\"]').title;");
    assert.match(why, /GRANT mesh_eraser TO console_reader/);
    screenshot("12a-read-only-erase-disabled");
  });

  // Last: it erases Alex's memories and messages, which earlier tests read.
  await t.test("the operator erases a person's memories: preview, reason, typed confirmation; the lineage shows the erasure", async () => {
    fixture("grant-eraser", OPERATOR);
    await click('[data-testid="sign-out"]');
    await find('form[aria-label="Sign in"]');
    await type('input[name="role"]', OPERATOR);
    await type('input[name="password"]', OPERATOR_PASSWORD);
    await click('button[type="submit"]');
    await waitText('[data-testid="session-role"]', OPERATOR);
    const entry = ids.stale.amended.entry;
    const before = fixture("erasure", entry, ids.alex);
    assert.deepEqual(before.operator_actions, []);
    assert.ok(before.bodies.every((b) => b !== "[erased]"));
    await openEntry(entry);
    assert.equal(await count('[data-testid="erase-limitation"]'), 0, "an eraser is not told it may not erase");
    const person = '[data-testid="erase-person"]';
    await waitText(person, "Erase everything about or told by Alex (id U790)");
    assert.equal(await enabled(person), true);
    await click(person);
    const dialog = '[data-testid="erase-dialog"]';
    await find(`${dialog} [data-testid="erase-preview"]`);
    const counted = async (kind) => Number(await text(`${dialog} [data-testid="erase-count-${kind}"] dd`));
    assert.ok((await counted("revisions")) >= 2, "Alex's memories, the amendment included");
    assert.ok((await counted("messages")) >= 2, "what Alex sent");
    assert.ok((await counted("sharing_requests")) >= 1, "Alex's sharing requests");
    assert.match(await text(`${dialog} [data-testid="erase-excerpts"]`), /Alex is out of office next Friday/);
    const submit = `${dialog} [data-testid="erase-submit"]`;
    assert.equal(await enabled(submit), false, "no reason, no confirmation yet");
    const reason = "GDPR erasure request #1234 from Alex Kim";
    await type(`${dialog} [data-testid="erase-reason"]`, reason);
    assert.equal(await enabled(submit), false, "not confirmed yet");
    await type(`${dialog} [data-testid="erase-confirm-word"]`, "erase");
    assert.equal(await enabled(submit), true);
    screenshot("erase-preview");
    await click(submit);
    await waitText('[data-testid="erase-result"]', `erased by ${OPERATOR}`);
    assert.equal(await count(dialog), 0, "the dialog closed");
    await waitText('[data-testid="revision-2"] [data-testid="erased-note"]', `erased by ${OPERATOR} on `);
    assert.match(await text('[data-testid="revision-2"] [data-testid="erased-note"]'), new RegExp(`: ${reason}$`));
    assert.equal(await text('[data-testid="revision-1"] [data-testid="body"]'), "[erased]");
    await click('[data-testid="erase-verify"]');
    await waitText('[data-testid="erase-verification"]', "Verified clean");
    screenshot("erase-history");
    await click('[data-testid="tab-lineage"]');
    await waitText('[data-testid="lineage-erased-note"]', `erased by ${OPERATOR}`);
    await waitFor("graph nodes", async () => (await count('[data-testid="lineage-graph"] .react-flow__node.erased')) >= 1);
    assert.match(await text('ul[aria-label="Lineage sources"]'), new RegExp(`erased by ${OPERATOR} on .*: ${reason}`));
    await sleep(500);
    screenshot("erase-lineage");
    const after = fixture("erasure", entry, ids.alex);
    assert.ok(after.bodies.length >= 2);
    assert.deepEqual([...new Set(after.bodies)], ["[erased]"]);
    assert.deepEqual(after.operator_actions, [`${OPERATOR}:person:${reason}`]);
  });

  await t.test("disconnecting returns to the connection screen", async () => {
    await click('[data-testid="disconnect"]');
    await find('[data-testid="connection-screen"]');
    assert.equal(await count('[data-testid="session-role"]'), 0, "signed out");
  });
});
