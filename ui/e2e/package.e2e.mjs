// The installed package, end to end in a real window (scripts/test-package.sh runs this under
// xvfb-run after `apt-get install ./mesh-memory-console_<version>_amd64.deb`): the installed
// console, with no DATABASE_URL, opens on the connection screen; a PostgreSQL that requires TLS
// (scripts/tls-test-server.sh, CA made by the test) refuses a wrong CA with "certificate not
// trusted"; with the right CA and verify-full, an auditor signs in and sees the memory browser.
//
// Environment: CONSOLE_APP (the installed /usr/bin/mesh-memory-console), TAURI_DRIVER,
// SCREENSHOT_DIR, and the TLS server's MESH_TLS_PORT, MESH_TLS_HOST, MESH_TLS_CA,
// MESH_TLS_WRONG_CA, MESH_TLS_DATABASE, MESH_TLS_AUDITOR, MESH_TLS_AUDITOR_PASSWORD;
// CONSOLE_CONFIG_DIR (the app's XDG_CONFIG_HOME) to check that no password was saved;
// MESH_DATA_DIR, where the local demo's cluster is made.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, readlinkSync, writeFileSync, mkdirSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startDriver, screenshot as saveScreenshot, waitFor } from "./webdriver.mjs";

const env = process.env;
const CLOSE_WINDOW = fileURLToPath(new URL("./close-window.py", import.meta.url));
const SHOTS = env.SCREENSHOT_DIR ?? "target/package-screenshots";
const screenshot = (name) => saveScreenshot(SHOTS, name);

/** Fills the server form of the connection screen and submits it. */
async function connect(driver, caFile) {
  await driver.fill("#conn-host", env.MESH_TLS_HOST ?? "localhost");
  await driver.fill("#conn-port", env.MESH_TLS_PORT);
  await driver.fill("#conn-database", env.MESH_TLS_DATABASE);
  await driver.choose("select#conn-sslmode", "verify-full");
  await driver.fill("#conn-sslrootcert", caFile);
  await driver.fill("#conn-role", env.MESH_TLS_AUDITOR);
  await driver.fill("#conn-password", env.MESH_TLS_AUDITOR_PASSWORD);
  await driver.click('[data-testid="connect-server"]');
}

test("the installed console signs an auditor in over verify-full TLS", { timeout: 300000 }, async (t) => {
  for (const name of ["CONSOLE_APP", "TAURI_DRIVER", "MESH_TLS_PORT", "MESH_TLS_CA", "MESH_TLS_WRONG_CA", "MESH_TLS_DATABASE", "MESH_TLS_AUDITOR", "MESH_TLS_AUDITOR_PASSWORD"]) {
    assert.ok(env[name], `${name} is required`);
  }
  const driver = await startDriver(env.TAURI_DRIVER);
  t.after(() => driver.quit());
  t.afterEach((sub) => {
    if (sub.passed === false) {
      try {
        screenshot(`failed-${sub.name.replace(/[^a-z0-9]+/gi, "-").slice(0, 60)}`);
      } catch {
        // no screen to capture
      }
    }
  });

  await t.test("without DATABASE_URL it opens on the connection screen", async () => {
    const launched = performance.now();
    await driver.launch(env.CONSOLE_APP);
    await driver.find('[data-testid="connection-screen"]', 60000);
    const firstScreenMs = Math.round(performance.now() - launched);
    console.log(`package: time from launch to the first screen: ${firstScreenMs} ms`);
    mkdirSync(SHOTS, { recursive: true });
    writeFileSync(join(SHOTS, "timings.json"), `${JSON.stringify({ launch_to_first_screen_ms: firstScreenMs })}\n`);
    screenshot("01-connection-screen");
  });

  await t.test("a CA that did not sign the server's certificate is refused", async () => {
    await connect(driver, env.MESH_TLS_WRONG_CA);
    const error = await driver.text('[data-testid="connection-error"]', 60000);
    assert.match(error, /certificate not trusted/i);
    assert.doesNotMatch(error, new RegExp(env.MESH_TLS_AUDITOR_PASSWORD), "the error never shows the password");
    assert.equal(await driver.count('[data-testid="session-role"]'), 0, "nobody is signed in");
    screenshot("02-wrong-ca-refused");
  });

  await t.test("the right CA signs the auditor in and shows the memory browser", async () => {
    await connect(driver, env.MESH_TLS_CA);
    await waitFor(
      "the auditor's session",
      async () => (await driver.text('[data-testid="session-role"]')).includes(env.MESH_TLS_AUDITOR),
      60000,
    );
    await driver.find('[data-testid="memory-table"] tbody tr', 30000);
    assert.ok((await driver.count('[data-testid="memory-table"] tbody tr')) >= 1, "the demo memories are listed");
    screenshot("03-signed-in-memory-browser");
  });

  await t.test("the saved connection holds no password", async () => {
    assert.ok(env.CONSOLE_CONFIG_DIR, "CONSOLE_CONFIG_DIR is required");
    // "Remember this connection" is on by default: the successful sign-in saved it.
    const file = join(env.CONSOLE_CONFIG_DIR, "mesh-memory", "connections.json");
    assert.ok(existsSync(file), `${file} was written`);
    const saved = readFileSync(file, "utf8");
    assert.match(saved, new RegExp(env.MESH_TLS_AUDITOR));
    assert.ok(!saved.includes(env.MESH_TLS_AUDITOR_PASSWORD), "no password on disk");
  });

  await t.test("the local demo runs on the package's own PostgreSQL, stopped when the window closes", async () => {
    assert.ok(env.MESH_DATA_DIR, "MESH_DATA_DIR is required");
    await driver.click('[data-testid="disconnect"]');
    await driver.click('[data-testid="connect-demo"]');
    // A fresh demo database: initdb, start, migrations (pgvector), then the first-run form.
    await driver.find('form[aria-label="Create operator role"]', 120000);
    const postmaster = execFileSync("pgrep", ["-f", `postgres -D ${env.MESH_DATA_DIR}/pgdata`], { encoding: "utf8" })
      .trim()
      .split("\n")[0];
    assert.equal(readlinkSync(`/proc/${postmaster}/exe`), "/usr/lib/mesh-memory/postgresql/bin/postgres");
    screenshot("04-local-demo");

    // Closing the window as a person does (WebDriver's own close would kill the app) ends the
    // console, which stops the cluster it started.
    execFileSync("python3", [CLOSE_WINDOW, "Mesh Memory Console"]);
    await waitFor("the demo PostgreSQL to stop", async () => !existsSync(`/proc/${postmaster}`), 60000);
  });
});
