// JupyterLab end to end: JupyterLab + jupyterlab-lsp + jupyter-lsp with torchlint registered as
// docs/editors.md says (jupyter_server_config.json), a notebook opened in headless Chromium
// (playwright-core): torchlint's findings are underlined on the right cells and listed in
// jupyterlab-lsp's diagnostics panel with their cell; then a fix. jupyterlab-lsp (5.x) has no
// code actions, so the fix is the documented one: `torchlint --fix` in a JupyterLab terminal,
// the notebook reloaded from disk, and the fixed findings gone. Run by scripts/e2e/run.
//
// Environment: E2E_VENV (a venv with jupyterlab, jupyterlab-lsp and torchlint[lsp]), CHROMIUM,
// E2E_OUT (screenshots).
import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "..", "..");
const require = createRequire(path.join(repo, "editors", "vscode", "package.json"));
const { chromium } = require("playwright-core");

const venv = process.env.E2E_VENV || path.join(repo, ".e2e", "venv");
const browserPath = process.env.CHROMIUM || "/usr/bin/chromium";
const shots = process.env.E2E_OUT || fs.mkdtempSync(path.join(os.tmpdir(), "torchlint-e2e-shots-"));
fs.mkdirSync(shots, { recursive: true });
const TIMEOUT = 90_000;
const log = (...a) => console.log(`[jupyterlab ${new Date().toISOString().slice(11, 19)}]`, ...a);

// The findings of fixtures/notebooks/train.ipynb that JupyterLab shows, by cell (1-based, as the
// diagnostics panel counts them), and the text each underline covers.
const EXPECTED = [
  { code: "TL101", cell: 3, text: "DataLoader(train_set, batch_size=128, shuffle=True)" },
  { code: "TL102", cell: 3, text: "DataLoader(train_set, batch_size=128, shuffle=True)" },
  { code: "TL301", cell: 5, text: "nn.Conv2d(3, 32, 3, padding=1)" },
  { code: "TL202", cell: 9, text: "torch.zeros(16, 3, 32, 32).cuda()" },
  { code: "TL004", cell: 9, text: "# noqa: TL501" },
];
// What `torchlint --fix` fixes (safe fixes): these go; the others stay.
const FIXED = new Set(["TL102", "TL202", "TL004"]);

// The configuration docs/editors.md gives for jupyter-lsp.
const SERVER_CONFIG = {
  LanguageServerManager: {
    language_servers: {
      torchlint: {
        version: 2,
        argv: ["torchlint", "server"],
        languages: ["python"],
        mime_types: ["text/x-python", "text/x-ipython"],
        display_name: "torchlint",
      },
    },
  },
};

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function waitHttp(url, ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    try {
      const r = await fetch(url);
      if (r.status < 500) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`${url} did not answer in ${ms / 1000} s`);
}

async function waitFor(check, what, ms = 60_000) {
  const end = Date.now() + ms;
  let last;
  while (Date.now() < end) {
    try {
      last = await check();
      if (last) return last;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`timed out waiting for ${what} (last: ${last})`);
}

/** Per cell (1-based): the text under each torchlint underline. */
function underlines(page) {
  return page.evaluate(() =>
    [...document.querySelectorAll(".jp-Notebook .jp-Cell")].map((cell) =>
      [...cell.querySelectorAll(".cm-lintRange")].map((e) => e.textContent),
    ),
  );
}

/** The rows of jupyterlab-lsp's diagnostics panel: {message, code, source, cell}. */
function panelRows(page) {
  return page.evaluate(() =>
    [...document.querySelectorAll(".lsp-diagnostics-listing tbody tr")].map((tr) => {
      const td = [...tr.querySelectorAll("td")].map((c) => c.textContent.trim());
      return { message: td[0], code: td[1], severity: td[2], source: td[3], cell: Number(td[4]), position: td[5] };
    }),
  );
}

async function command(page, label) {
  await page.keyboard.press("Control+Shift+C");
  const input = page.locator(".lm-CommandPalette-input");
  await input.waitFor();
  await input.fill(label);
  await page.locator(".lm-CommandPalette-item", { hasText: label }).first().click();
}

async function main() {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "torchlint-e2e-jupyterlab-"));
  const workspace = path.join(tmp, "project");
  const config = path.join(tmp, "config");
  const settings = path.join(tmp, "settings");
  fs.mkdirSync(workspace);
  fs.mkdirSync(config);
  fs.mkdirSync(path.join(settings, "@jupyterlab", "apputils-extension"), { recursive: true });
  fs.copyFileSync(path.join(repo, "fixtures", "notebooks", "train.ipynb"), path.join(workspace, "train.ipynb"));
  fs.writeFileSync(path.join(workspace, "pyproject.toml"), "[tool.torchlint]\n");
  fs.writeFileSync(path.join(config, "jupyter_server_config.json"), JSON.stringify(SERVER_CONFIG, null, 2));
  // no "get notified about Jupyter news?" toast over the notebook
  fs.writeFileSync(
    path.join(settings, "@jupyterlab", "apputils-extension", "notification.jupyterlab-settings"),
    JSON.stringify({ fetchNews: "false", checkForUpdates: false }),
  );

  const port = await freePort();
  const bin = path.join(venv, "bin");
  const env = {
    ...process.env,
    PATH: `${bin}${path.delimiter}${process.env.PATH}`,
    JUPYTER_CONFIG_DIR: config,
    JUPYTERLAB_SETTINGS_DIR: settings,
    JUPYTERLAB_WORKSPACES_DIR: path.join(tmp, "workspaces"),
    JUPYTER_RUNTIME_DIR: path.join(tmp, "runtime"),
  };
  const lab = spawn(
    path.join(bin, "jupyter"),
    ["lab", "--no-browser", "--allow-root", "--ServerApp.token=", "--ServerApp.password=", "--ServerApp.ip=127.0.0.1",
      `--ServerApp.port=${port}`, `--ServerApp.root_dir=${workspace}`, "--LabApp.news_url=None"],
    { cwd: workspace, env, stdio: ["ignore", "pipe", "pipe"], detached: true },
  );
  const labLog = fs.createWriteStream(path.join(shots, "jupyterlab.log"));
  lab.stdout.pipe(labLog);
  lab.stderr.pipe(labLog);
  let browser;
  let passed = false;
  let page;
  try {
    await waitHttp(`http://127.0.0.1:${port}/api`, 90_000);
    const status = await (await fetch(`http://127.0.0.1:${port}/lsp/status`)).json();
    if (!status.sessions?.torchlint) {
      throw new Error(`jupyter-lsp does not list torchlint: ${Object.keys(status.sessions || {})}`);
    }
    log(`JupyterLab on port ${port}; jupyter-lsp lists torchlint`);
    browser = await chromium.launch({ executablePath: browserPath, args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
    page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    page.setDefaultTimeout(TIMEOUT);
    await page.goto(`http://127.0.0.1:${port}/lab/tree/train.ipynb`);
    await page.locator(".jp-Notebook .jp-Cell").first().waitFor();

    // -- the findings, on the right cells --------------------------------------------------
    const want = (cells) => EXPECTED.every((e) => (cells[e.cell - 1] || []).includes(e.text));
    await waitFor(async () => want(await underlines(page)), "torchlint's underlines on cells 3, 5 and 9", TIMEOUT);
    const cells = await underlines(page);
    log(`underlines by cell: ${JSON.stringify(cells.map((u, i) => [i + 1, u.length]).filter(([, n]) => n))}`);
    for (const [i, texts] of cells.entries()) {
      for (const text of texts) {
        if (!EXPECTED.some((e) => e.cell === i + 1 && e.text === text)) {
          throw new Error(`unexpected underline in cell ${i + 1}: ${text}`);
        }
      }
    }
    // the message on hover
    await page.locator(".jp-Notebook .jp-Cell").nth(2).locator(".cm-lintRange").first().hover();
    const tooltip = page.locator(".cm-tooltip-lint");
    await tooltip.getByText("pin_memory=True", { exact: false }).first().waitFor();
    await page.screenshot({ path: path.join(shots, "jupyterlab-1-notebook-findings.png") });

    await command(page, "Show diagnostics panel");
    await page.locator(".lsp-diagnostics-listing").waitFor();
    const rows = await waitFor(async () => {
      const r = await panelRows(page);
      return r.length >= EXPECTED.length ? r : undefined;
    }, "the diagnostics panel rows");
    for (const e of EXPECTED) {
      if (!rows.some((r) => r.code === e.code && r.cell === e.cell && r.source === "torchlint")) {
        throw new Error(`diagnostics panel has no ${e.code} on cell ${e.cell}: ${JSON.stringify(rows)}`);
      }
    }
    log(`diagnostics panel: ${rows.map((r) => `${r.code}@cell ${r.cell}`).join(", ")}`);
    await page.screenshot({ path: path.join(shots, "jupyterlab-2-diagnostics-panel.png") });

    // -- a fix: torchlint --fix in a JupyterLab terminal, then reload the notebook ------------
    await command(page, "New Terminal");
    const terminal = page.locator(".jp-Terminal .xterm");
    await terminal.waitFor();
    await page.waitForTimeout(2000);
    await terminal.click();
    await page.keyboard.type("torchlint --fix train.ipynb; echo $? > .fix-status\n", { delay: 10 });
    const nbPath = path.join(workspace, "train.ipynb");
    await waitFor(() => {
      const nb = JSON.parse(fs.readFileSync(nbPath, "utf8"));
      return nb.cells.some((c) => [].concat(c.source).join("").includes("pin_memory=True, "))
        || nb.cells.some((c) => /DataLoader\(train_set, batch_size=128, shuffle=True, pin_memory=True\)/.test([].concat(c.source).join("")));
    }, "train.ipynb fixed on disk by torchlint --fix");
    // its exit status (1: findings are left, those with unsafe fixes or none)
    const statusFile = path.join(workspace, ".fix-status");
    await waitFor(() => fs.existsSync(statusFile) && fs.readFileSync(statusFile, "utf8").trim() === "1", "torchlint --fix's exit status 1");
    await page.screenshot({ path: path.join(shots, "jupyterlab-3-terminal-fix.png") });
    log("torchlint --fix ran in the JupyterLab terminal: train.ipynb has pin_memory=True on disk");

    await page.locator(".lm-TabBar-tab", { hasText: "train.ipynb" }).first().click();
    await command(page, "Reload Notebook from Disk");
    const ok = page.locator(".jp-Dialog .jp-mod-accept");
    if (await ok.count()) await ok.click();
    await waitFor(async () => {
      const u = await underlines(page);
      return !(u[8] || []).some((t) => t.includes(".cuda()")) && (u[2] || []).length === 1 && (u[4] || []).length === 1;
    }, "the fixed findings to go (one underline left on cells 3 and 5, none for TL202)");
    await command(page, "Show diagnostics panel");
    const after = await waitFor(async () => {
      const r = await panelRows(page);
      return r.length > 0 && !r.some((x) => FIXED.has(x.code)) ? r : undefined;
    }, "the diagnostics panel without the fixed codes");
    log(`after the fix: ${after.map((r) => `${r.code}@cell ${r.cell}`).join(", ")}`);
    await page.screenshot({ path: path.join(shots, "jupyterlab-4-after-fix.png") });
    log(`screenshots in ${shots}`);
    passed = true;
  } catch (err) {
    if (page) await page.screenshot({ path: path.join(shots, "jupyterlab-FAILED.png") }).catch(() => {});
    throw err;
  } finally {
    if (browser) await browser.close().catch(() => {});
    try { process.kill(-lab.pid, "SIGTERM"); } catch {}
    // the temporary workspace and JupyterLab's settings: kept when it failed
    if (passed) {
      await new Promise((r) => setTimeout(r, 2000));
      try { fs.rmSync(tmp, { recursive: true, force: true, maxRetries: 3 }); } catch {}
    }
  }
}

const started = Date.now();
main().then(
  () => { log(`PASS in ${((Date.now() - started) / 1000).toFixed(1)} s`); process.exit(0); },
  (err) => { console.error(`[jupyterlab] FAIL: ${err.stack || err}`); process.exit(1); },
);
