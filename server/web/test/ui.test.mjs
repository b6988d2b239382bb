// End-to-end test of the live search view (/ui) in headless Chromium,
// driven by playwright-core (Debian's chromium: npm cannot download
// browsers here). Run by scripts/ui-test.sh, which starts `nesy serve`.
//
//   NESY_URL   the server (default http://127.0.0.1:11435)
//   OUT        where screenshots and ui-metrics.json go (default out/ui-test)
//   CHROMIUM   the browser (default /usr/bin/chromium)
//
// It loads /ui, runs constrained MCTS on the embedded Blocksworld example,
// checks that the tree has more than 10 nodes and that the plan shown is
// the plan the API returns (the stream's result and a separate POST
// /v1/plan with the same seed), saves screenshots mid-search and at the
// end, and measures render time and update latency with a 5,000-node tree.
import { chromium } from 'playwright-core';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const url = process.env.NESY_URL || 'http://127.0.0.1:11435';
const out = process.env.OUT || 'out/ui-test';
const seconds = 120;
mkdirSync(out, { recursive: true });

let failures = 0;
function check(ok, what) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures++;
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--no-first-run', '--disable-quic', '--disable-sync'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1500, height: 850 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));

  await page.goto(url + '/ui');
  await page.waitForFunction(() => document.querySelector('#source option[value^="example:"]'));
  const source = await page.$eval('#source', (s) => s.value);
  check(source.startsWith('example:blocks'), `the embedded Blocksworld example is offered (${source})`);
  await page.selectOption('#method', 'cmcts');
  await page.fill('#seconds', String(seconds));
  await page.fill('#seed', '1');
  const t0 = Date.now();
  await page.click('#start');

  // Mid-search: tree events with a few dozen nodes have arrived (or the
  // result, on a machine fast enough to finish first).
  await page.waitForFunction(() => window.nesyUI.model.nodes.size > 40 || window.nesyUI.lastResult, null, { timeout: seconds * 1000 });
  const mid = await page.evaluate(() => ({ nodes: window.nesyUI.model.nodes.size, done: !!window.nesyUI.lastResult }));
  await page.screenshot({ path: join(out, 'mid-search.png') });
  console.log(`mid-search screenshot at ${mid.nodes} nodes (result already in: ${mid.done})`);

  await page.waitForFunction(() => window.nesyUI.lastResult || !document.querySelector('#error').hidden, null, { timeout: (seconds + 60) * 1000 });
  const searchSeconds = (Date.now() - t0) / 1000;
  await page.waitForTimeout(300); // a frame or two for the last render
  const state = await page.evaluate(() => ({
    nodes: window.nesyUI.model.nodes.size,
    result: window.nesyUI.lastResult,
    shown: [...document.querySelectorAll('#plan > li summary, #plan > li:not(:has(summary))')].map((li) => li.textContent),
    best: [...document.querySelectorAll('#best > li')].map((li) => li.textContent),
    cert: document.querySelector('#cert').innerText,
    error: document.querySelector('#error').textContent,
  }));
  await page.screenshot({ path: join(out, 'final.png') });
  check(!state.error, `no error shown (${state.error})`);
  check(state.result && state.result.goal_reached && state.result.valid, `the plan is valid and reaches the goal (${state.result && state.result.stop_reason})`);
  check(state.nodes > 10, `the tree has more than 10 nodes (${state.nodes})`);
  const plan = state.result ? state.result.plan : [];
  check(plan.length > 0 && JSON.stringify(state.shown) === JSON.stringify(plan), `the plan shown ${JSON.stringify(state.shown)} is the streamed result's`);
  check(JSON.stringify(state.best) === JSON.stringify(plan), 'the best plan so far ends as the plan');
  writeFileSync(join(out, 'plan.txt'), plan.join('\n') + '\n');

  // The same request through the API, without the page.
  const ex = await page.evaluate(() => window.nesyTasks.examples[0]);
  const resp = await fetch(url + '/v1/plan', {
    method: 'POST',
    body: JSON.stringify({ domain: ex.domain, problem: ex.problem, method: 'cmcts', seconds, search: { seed: 1 }, sampling: { seed: 1 } }),
  });
  const api = await resp.json();
  check(resp.ok && JSON.stringify(api.plan) === JSON.stringify(state.shown), `the API returns the plan shown (${JSON.stringify(api.plan)})`);

  // 5,000 nodes: grow a synthetic search tree in deltas of 250 nodes (as a
  // search reports them: new nodes plus their ancestors' new visits), then
  // update 250 visited nodes per delta at 5,000; measure the render (tree
  // selection, d3 layout, canvas drawing) and the update latency (delta in
  // to frame drawn), with the default cap of 1,500 nodes drawn.
  const perf = await page.evaluate(async () => {
    const ui = window.nesyUI;
    ui.reset();
    const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
    let seed = 7;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
    const pieces = ['pick', '-up', ' a', ' b', ' c', ' d', 'stack', 'un', 'put', '-down', '\n', ' e', ' f'];
    const nodes = [{ id: 0, parent: -1, text: '', visits: 0, value: -3, prior: 1, actions: 0, kind: 'open' }];
    const byId = new Map([[0, nodes[0]]]);
    let total = 1;
    const grow = (k) => {
      const changed = new Map();
      for (let i = 0; i < k; i++) {
        // Deep, narrow trees like a search's: prefer recent nodes.
        const p = nodes[Math.max(0, nodes.length - 1 - Math.floor(rnd() * rnd() * nodes.length))];
        const n = { id: total++, parent: p.id, text: pieces[Math.floor(rnd() * pieces.length)], visits: 0, value: -3 + rnd(), prior: rnd(),
          actions: 0, kind: rnd() < 0.05 ? 'dead' : 'open' };
        nodes.push(n);
        byId.set(n.id, n);
        for (let x = n; x; x = byId.get(x.parent)) {
          x.visits++;
          changed.set(x.id, x);
        }
      }
      return [...changed.values()].sort((a, b) => a.id - b.id).map((x) => ({ ...x }));
    };
    const deltaOf = (list) => ({ nodes: list, best: list[list.length - 1].id, best_plan: ['(pick-up a)'], best_goal: false, simulations: total, tree_nodes: total });
    ui.metrics.updates.length = 0;
    ui.metrics.renders.length = 0;
    while (total < 5000) {
      ui.applyDelta(deltaOf(grow(250)));
      await frame();
      await frame();
    }
    const growth = { renders: ui.metrics.renders.slice(), updates: ui.metrics.updates.slice() };
    ui.metrics.updates.length = 0;
    ui.metrics.renders.length = 0;
    const intervals = [];
    let last = performance.now();
    for (let i = 0; i < 40; i++) {
      const list = [];
      for (let j = 0; j < 250; j++) {
        const n = nodes[Math.floor(rnd() * nodes.length)];
        n.visits++;
        list.push({ ...n });
      }
      list.sort((a, b) => a.id - b.id);
      ui.applyDelta(deltaOf(list));
      await frame();
      const now = performance.now();
      intervals.push(now - last);
      last = now;
    }
    return { nodes: ui.model.nodes.size, growth, steady: { renders: ui.metrics.renders.slice(), updates: ui.metrics.updates.slice(), intervals } };
  });
  await page.screenshot({ path: join(out, 'tree-5000.png') });
  const q = (xs, p) => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : NaN;
  };
  const f = (x) => x.toFixed(1);
  const summary = {
    nodes: perf.nodes,
    render_ms_median: q(perf.steady.renders, 0.5),
    render_ms_p95: q(perf.steady.renders, 0.95),
    update_latency_ms_median: q(perf.steady.updates, 0.5),
    update_latency_ms_p95: q(perf.steady.updates, 0.95),
    frame_interval_ms_median: q(perf.steady.intervals, 0.5),
    growth_render_ms_max: Math.max(...perf.growth.renders),
    search_seconds: searchSeconds,
    search_nodes: state.nodes,
  };
  writeFileSync(join(out, 'ui-metrics.json'), JSON.stringify({ summary, perf }, null, 1));
  console.log(`5,000-node tree: render median ${f(summary.render_ms_median)} ms, p95 ${f(summary.render_ms_p95)} ms; ` +
    `update latency median ${f(summary.update_latency_ms_median)} ms, p95 ${f(summary.update_latency_ms_p95)} ms; ` +
    `frame interval median ${f(summary.frame_interval_ms_median)} ms; growth render max ${f(summary.growth_render_ms_max)} ms`);
  check(perf.nodes >= 5000, `the synthetic tree has ${perf.nodes} nodes`);
  check(summary.update_latency_ms_p95 < 1000, `updates at 5,000 nodes are drawn within a second (p95 ${f(summary.update_latency_ms_p95)} ms)`);
  check(errors.length === 0, `no page errors (${errors.join('; ')})`);
} finally {
  await browser.close();
}
if (failures > 0) {
  console.log(`${failures} check(s) failed`);
  process.exit(1);
}
console.log('ui test passed');
