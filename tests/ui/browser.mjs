// The web UI in a real browser: Debian's Chromium, headless, driven by playwright-core.
//
//   node tests/ui/browser.mjs <tephra binary> <screenshot directory>
//
// Starts `tephra dev`, reads the address it prints on its `UI:` line, applies a Volcano Job
// that runs and one that can never fit, and checks in the browser: each page loads and shows
// both jobs with the right state and reason, a link leads to the filtered jobs, and a job
// applied while the page is open appears without a reload. Screenshots of every page (and of
// the jobs page in the dark theme) go to the screenshot directory. Exits 0 when every check
// passes; otherwise prints what failed and exits 1.

import { spawn, execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { chromium } from "playwright-core";

const [tephra, shots] = process.argv.slice(2);
if (!tephra || !shots) {
  console.error("usage: node browser.mjs <tephra binary> <screenshot directory>");
  process.exit(2);
}
mkdirSync(shots, { recursive: true });
const work = mkdtempSync(join(tmpdir(), "tephra-ui-"));
const kubeconfig = join(work, "kubeconfig");

function job(name, replicas, cpu) {
  return `apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: ${name}
  namespace: default
spec:
  schedulerName: volcano
  queue: default
  minAvailable: ${replicas}
  tasks:
    - name: worker
      replicas: ${replicas}
      template:
        metadata:
          annotations: {tephra.io/sim-duration: "1h"}
        spec:
          containers:
            - name: main
              image: busybox
              resources: {requests: {cpu: "${cpu}"}, limits: {cpu: "${cpu}"}}
`;
}

/// A Volcano Job of `replicas` pods of 8 GPUs each, expected (by its pods) to run `expected`.
function gpuJob(name, replicas, expected) {
  return job(name, replicas, "1")
    .replace('annotations: {tephra.io/sim-duration: "1h"}',
      `annotations: {tephra.io/sim-duration: "1h", tephra.io/expected-duration: "${expected}"}`)
    .replace('resources: {requests: {cpu: "1"}, limits: {cpu: "1"}}',
      'resources: {requests: {cpu: "1", nvidia.com/gpu: "8"}, limits: {cpu: "1", nvidia.com/gpu: "8"}}');
}

function kubectl(...args) {
  return execFileSync("kubectl", args, { env: { ...process.env, KUBECONFIG: kubeconfig } }).toString();
}

function apply(name, text) {
  const file = join(work, `${name}.yaml`);
  writeFileSync(file, text);
  execFileSync("kubectl", ["apply", "-f", file], { env: { ...process.env, KUBECONFIG: kubeconfig } });
}

/// Starts `tephra dev` and resolves with the UI's address from its `UI:` line.
function startDev() {
  const dev = spawn(tephra, ["dev", "--kubeconfig", kubeconfig], { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    let ui = null;
    const lines = createInterface({ input: dev.stdout });
    lines.on("line", (line) => {
      if (line.startsWith("UI: ")) ui = line.slice(4).trim();
      if (line.startsWith("export KUBECONFIG=")) {
        if (ui) resolve({ dev, ui });
        else reject(new Error("tephra dev printed no UI: line before its export line"));
      }
    });
    dev.on("exit", (code) => reject(new Error(`tephra dev exited (${code})`)));
    setTimeout(() => reject(new Error("tephra dev did not print its export line in 60 s")), 60_000);
  });
}

const checks = [];
function check(what, ok, detail = "") {
  checks.push({ what, ok });
  console.log(`${ok ? "ok  " : "FAIL"} ${what}${detail ? ": " + detail : ""}`);
}

let dev = null;
let browser = null;
try {
  const started = await startDev();
  dev = started.dev;
  const ui = started.ui;
  check("tephra dev prints the UI address", /^http:\/\/127\.0\.0\.1:\d+\/ui\/$/.test(ui), ui);
  apply("runs", job("runs", 2, "1"));
  apply("never", job("never", 1, "4096"));
  // A job that runs for five seconds and is gone (its PodGroup with it) soon after.
  apply("brief", job("brief", 1, "1").replace('tephra.io/sim-duration: "1h"', 'tephra.io/sim-duration: "5s"'));

  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"],
  });
  const page = await browser.newPage({ viewport: { width: 1400, height: 800 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));

  // Jobs: one runs, the other waits and says why.
  await page.goto(ui + "#jobs");
  const runs = page.locator('tr[data-job^="default/runs"]');
  const never = page.locator('tr[data-job^="default/never"]');
  await runs.locator("td.Running").waitFor({ timeout: 30_000 });
  check("the running job shows Running", true);
  const where = await runs.locator("td").nth(4).innerText();
  check("the running job shows its member cluster", where.trim().length > 0, where);
  await never.waitFor({ timeout: 30_000 });
  await page.waitForFunction(
    () => (document.querySelector('tr[data-job^="default/never"] td:last-child')?.textContent || "").includes("cpu"),
    null,
    { timeout: 30_000 },
  );
  const why = await never.locator("td").last().innerText();
  check("the job that cannot fit says why, naming cpu", why.includes("cpu"), why);
  const phase = await never.locator("td").nth(2).innerText();
  check("the job that cannot fit is not Running", phase !== "Running", phase);
  await page.screenshot({ path: join(shots, "jobs.png"), fullPage: true });
  await page.emulateMedia({ colorScheme: "dark" });
  await page.screenshot({ path: join(shots, "jobs-dark.png"), fullPage: true });
  await page.emulateMedia({ colorScheme: "light" });

  // Keyed by the name the user gave: the Volcano Job's, not its PodGroup's generated one.
  check("a Volcano Job is listed under its own name", (await page.locator('tr[data-job="default/runs"]').count()) === 1,
    (await page.locator("tr[data-job]").evaluateAll((rows) => rows.map((r) => r.dataset.job))).join(", "));
  // A finished job is kept, with where it ran.
  const gone = page.locator('tr[data-gone="default/brief"]');
  await gone.waitFor({ timeout: 60_000 });
  const ran = await gone.locator("td").nth(4).innerText();
  check("a finished job stays listed with the member it ran in", ran.trim().length > 0 && ran !== "nowhere", ran);
  await page.goto(ui + "#job?key=default/brief");
  await page.locator("dl[data-gone]").waitFor({ timeout: 10_000 });
  const goneText = await page.locator("main").innerText();
  check("a finished job's page says it is gone and where it ran", /Gone/.test(goneText) && /Ran in/.test(goneText),
    goneText.replace(/\s+/g, " ").slice(0, 200));
  await page.goto(ui + "#job?key=default/runs");
  await page.locator("dl dd").first().waitFor({ timeout: 10_000 });
  const runsPage = await page.locator("main").innerText();
  check("a job's page answers to the Volcano Job's name", !runsPage.includes("is not in the fleet"), runsPage.replace(/\s+/g, " ").slice(0, 120));
  await page.goto(ui + "#jobs");

  // Updates without a reload: a job applied while the page is open appears.
  await page.evaluate(() => { window.__sameDocument = true; });
  apply("late", job("late", 1, "1"));
  await page.locator('tr[data-job^="default/late"]').waitFor({ timeout: 30_000 });
  const same = await page.evaluate(() => window.__sameDocument === true);
  check("a job applied while the page is open appears without a reload", same);

  // A Job a JobFlow made says which flow made it.
  apply("prep-template", job("prep", 1, "1").replace("kind: Job", "kind: JobTemplate")
    .replace("batch.volcano.sh/v1alpha1", "flow.volcano.sh/v1alpha1"));
  apply("pipe", "apiVersion: flow.volcano.sh/v1alpha1\nkind: JobFlow\nmetadata: {name: pipe, namespace: default}\n" +
    "spec: {flows: [{name: prep}]}\n");
  const made = page.locator('tr[data-job="default/pipe-prep"] [data-owner]');
  await made.waitFor({ timeout: 30_000 });
  const owner = await made.innerText();
  check("a job a JobFlow made names the flow", owner.includes("JobFlow pipe"), owner);

  // Queues, and a link from a queue to its jobs.
  await page.goto(ui + "#queues");
  const queue = page.locator('tr[data-queue="default"]');
  await queue.waitFor({ timeout: 30_000 });
  const counts = await queue.innerText();
  check("the default queue is listed with its figures", /cpu/.test(counts), counts.replace(/\s+/g, " "));
  await page.screenshot({ path: join(shots, "queues.png"), fullPage: true });
  await queue.locator("a").first().click();
  await page.waitForFunction(() => location.hash.startsWith("#jobs?queue=default"));
  await runs.waitFor({ timeout: 10_000 });
  check("the queue's link leads to its jobs", true, await page.evaluate(() => location.hash));

  // Clusters.
  await page.goto(ui + "#clusters");
  const member = page.locator("tr[data-cluster]").first();
  await member.waitFor({ timeout: 30_000 });
  const health = await member.locator("td").nth(1).innerText();
  check("clusters show their health", health === "Ready", health);
  const classes = await page.locator('tr[data-cluster="us-east-gpu"] [data-class]').allInnerTexts();
  check("clusters show their node classes", classes.some((c) => c.startsWith("NVIDIA-A100")), classes.join("; "));
  await page.screenshot({ path: join(shots, "clusters.png"), fullPage: true });

  // Expected start: every extended GPU taken by two jobs expected to run 30 minutes, a third
  // job of 8 GPUs waits and is expected in about 30 minutes; the job that never fits is
  // expected never, saying why (never is not "later").
  apply("hog-a", gpuJob("hog-a", 6, "30m"));
  await page.goto(ui + "#jobs");
  await page.locator('tr[data-job^="default/hog-a"] td.Running').waitFor({ timeout: 30_000 });
  apply("hog-b", gpuJob("hog-b", 2, "30m"));
  await page.locator('tr[data-job^="default/hog-b"] td.Running').waitFor({ timeout: 30_000 });
  apply("queued", gpuJob("queued", 1, "10m"));
  await page.waitForFunction(
    () => /in (2\d|30)m/.test(document.querySelector('tr[data-job^="default/queued"] td[data-eta]')?.textContent || ""),
    null,
    { timeout: 30_000 },
  );
  const eta = await page.locator('tr[data-job^="default/queued"] td[data-eta]').innerText();
  check("a job waiting behind jobs expected to run 30m is expected in about 30m", true, eta);
  check("the expected start says how sure it is", /· high/.test(eta), eta);
  const never_eta = await page.locator('tr[data-job^="default/never"] td[data-eta]').innerText();
  check("the job that never fits is expected never, with why", never_eta.startsWith("never: it can never be placed"), never_eta);
  await page.screenshot({ path: join(shots, "jobs-eta.png"), fullPage: true });

  // A job's page: its expected start and its history of phases and reasons.
  await page.locator('tr[data-job^="default/queued"] a').first().click();
  await page.waitForFunction(() => location.hash.startsWith("#job?key="));
  await page.locator("tr[data-change]").first().waitFor({ timeout: 10_000 });
  const detail = await page.locator("main").innerText();
  check("a job's page shows its expected start and its history", /in (2\d|30)m/.test(detail) && /Pending|Inqueue/.test(detail),
    detail.replace(/\s+/g, " ").slice(0, 200));
  const basis = await page.locator("dd[data-basis]").innerText();
  check("a job's page says what its expected start assumes", /assumes \d+ running pod\(s\) end before it/.test(basis) &&
    /default\/hog-[ab] ends/.test(basis) && basis.includes("tephra.io/expected-duration"), basis);
  await page.screenshot({ path: join(shots, "job.png"), fullPage: true });
  const split = await page.evaluate(() => perCluster("2/2 tasks in gang unschedulable: cluster east: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu; cluster west: cluster is tainted"));
  check("a waiting job's reason is split by member cluster",
    JSON.stringify(split) === JSON.stringify([["east", "0/3 nodes are available: 3 Insufficient nvidia.com/gpu"], ["west", "cluster is tainted"]]),
    JSON.stringify(split));

  // A queue's figures over time.
  await page.goto(ui + "#queues?queue=default");
  await page.locator('.chart[data-chart="nvidia.com/gpu"] path.a').waitFor({ timeout: 10_000 });
  check("the queue's page charts its GPUs over time", true);
  const window_ = await page.evaluate(() => [history.since, hhmm(history.since),
    document.querySelector('.chart[data-chart="nvidia.com/gpu"] .dim').textContent]);
  check("the chart's window starts where the replica's history does", window_[0] > 0 && window_[2].includes("since " + window_[1]),
    JSON.stringify(window_));
  await page.screenshot({ path: join(shots, "queue-chart.png"), fullPage: true });

  // Failover: the member running hog-a stops answering; the timeline shows its outage.
  await page.goto(ui + "#failover");
  await page.locator("#timeline").waitFor({ timeout: 10_000 });
  kubectl("--context", "control-plane", "annotate", "cluster", "us-east-gpu", "tephra.io/dev-fault=unreachable");
  await page.locator('tr[data-event="ClusterNotReady"]').waitFor({ timeout: 30_000 });
  const outage = await page.locator('tr[data-event="ClusterNotReady"]').first().innerText();
  check("the failover page shows the member's outage", outage.includes("us-east-gpu"), outage.replace(/\s+/g, " "));
  check("the timeline draws it", (await page.locator("#timeline rect.outage").count()) > 0);
  await page.screenshot({ path: join(shots, "failover.png"), fullPage: true });
  kubectl("--context", "control-plane", "annotate", "cluster", "us-east-gpu", "tephra.io/dev-fault-");

  check("no script error on any page", errors.length === 0, errors.join("; "));
} catch (e) {
  check("the run completes", false, String(e && e.stack ? e.stack : e));
} finally {
  if (browser) await browser.close();
  if (dev) dev.kill("SIGTERM");
  rmSync(work, { recursive: true, force: true });
}
const failed = checks.filter((c) => !c.ok);
console.log(`${checks.length - failed.length} of ${checks.length} checks passed; screenshots in ${shots}`);
process.exit(failed.length === 0 ? 0 : 1);
