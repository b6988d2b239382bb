// nesy's live search view: starts a streamed POST /v1/plan with "tree": true
// and draws the token-level search tree from its "search" events on a
// canvas, laid out by d3-hierarchy's tidy tree. Large trees stay
// responsive: nodes below a depth are collapsed into their ancestor, at most
// a given number of nodes (the most visited, the best path always) are
// drawn, and the layout runs at most once per animation frame.
import { hierarchy, tree as tidyTree } from 'd3-hierarchy';

const $ = (id) => document.getElementById(id);
const ROW = 20; // px between siblings at zoom 1
const COL = 64; // px between depths at zoom 1 (at least half of it)
const CHAR = 7.2; // px per label character at zoom 1 (12px monospace)
const LABEL = 28; // characters of an edge label drawn at most

// The tree as reported so far. nodes: id -> node; a node keeps the fields
// of the server's TreeNode plus kids (ids) and depth.
const model = {
  nodes: new Map(),
  best: -1,
  bestPlan: [],
  bestGoal: false,
  treeNodes: 0,
  simulations: 0,
};

// fitAll: the Fit button fits the whole tree, however small; the automatic
// fit keeps labels legible.
const view = { scale: 1, x: 40, y: 0, userMoved: false, fitAll: false, drawn: [], dirty: false, layoutRoot: null };
const metrics = { updates: [], renders: [], pending: [] };
let controller = null;
let lastResult = null;

function resetModel() {
  model.nodes.clear();
  model.best = -1;
  model.bestPlan = [];
  model.bestGoal = false;
  model.treeNodes = 0;
  model.simulations = 0;
  view.userMoved = false;
  view.fitAll = false;
  view.drawn = [];
  view.layoutRoot = null;
  lastResult = null;
  schedule();
}

// applyDelta merges one TreeDelta into the model and schedules a render.
function applyDelta(d) {
  const t0 = performance.now();
  for (const n of d.nodes || []) {
    const old = model.nodes.get(n.id);
    if (old) {
      Object.assign(old, n);
      continue;
    }
    const parent = model.nodes.get(n.parent);
    if (n.id !== 0 && !parent) continue; // its parent was capped away
    const node = { ...n, kids: [], depth: parent ? parent.depth + 1 : 0 };
    model.nodes.set(n.id, node);
    if (parent) parent.kids.push(n.id);
  }
  model.best = d.best;
  model.bestPlan = d.best_plan || [];
  model.bestGoal = !!d.best_goal;
  model.treeNodes = d.tree_nodes || model.nodes.size;
  model.simulations = d.simulations || 0;
  metrics.pending.push(t0);
  schedule();
  renderBest();
}

function schedule() {
  if (view.dirty) return;
  view.dirty = true;
  requestAnimationFrame(render);
}

// prefixOf is the text a node stands for: its edges from the root.
function prefixOf(id) {
  const parts = [];
  for (let n = model.nodes.get(id); n && n.id !== 0; n = model.nodes.get(n.parent)) parts.push(n.text);
  return parts.reverse().join('');
}

// visibleTree picks the nodes to draw: the best path, then the most
// visited nodes whose parent is drawn, down to the collapse depth, at most
// cap; every drawn node counts its hidden descendants.
function visibleTree(maxDepth, cap) {
  const root = model.nodes.get(0);
  if (!root) return null;
  const keep = new Set();
  for (let n = model.nodes.get(model.best); n; n = model.nodes.get(n.parent)) keep.add(n.id);
  let within = 0;
  for (const n of model.nodes.values()) if (n.depth <= maxDepth) within++;
  if (within + keep.size > cap) {
    keep.add(0);
    const order = [...model.nodes.values()].filter((n) => n.depth <= maxDepth && !keep.has(n.id));
    order.sort((a, b) => b.visits - a.visits || a.depth - b.depth || a.id - b.id);
    // Parents have at least their children's visits, so this order mostly
    // meets parents first; a child met before its parent waits.
    for (const n of order) {
      if (keep.size >= cap) break;
      if (keep.has(n.parent)) keep.add(n.id);
    }
  } else {
    for (const n of model.nodes.values()) if (n.depth <= maxDepth) keep.add(n.id);
  }
  // Subtree sizes, children after parents in id order (ids grow downwards).
  const size = new Map();
  const ids = [...model.nodes.keys()].sort((a, b) => b - a);
  for (const id of ids) {
    const n = model.nodes.get(id);
    let s = 1;
    for (const k of n.kids) s += size.get(k) || 0;
    size.set(id, s);
  }
  // A chain of drawn nodes with one drawn child each and nothing hidden
  // is drawn as one edge carrying the chain's text (usually the tokens of
  // one action), so the drawing shows where the search branched.
  const build = (n, isRoot) => {
    const out = { n, text: isRoot ? '' : n.text, children: [], hidden: 0 };
    let cur = n;
    for (;;) {
      const kept = [];
      let hidden = 0;
      for (const k of cur.kids) {
        if (keep.has(k)) kept.push(k);
        else hidden += size.get(k) || 0;
      }
      if (!isRoot && kept.length === 1 && hidden === 0 && cur.kind === 'open' && cur.id !== model.best) {
        cur = model.nodes.get(kept[0]);
        out.text += cur.text;
        continue;
      }
      out.n = cur;
      out.hidden = hidden;
      for (const k of kept) out.children.push(build(model.nodes.get(k), false));
      break;
    }
    out.children.sort((a, b) => b.n.visits - a.n.visits || a.n.id - b.n.id);
    return out;
  };
  return { root: build(root, true), drawn: keep.size };
}

function render() {
  view.dirty = false;
  const t0 = performance.now();
  const canvas = $('tree');
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth;
  const h = canvas.clientHeight;
  if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
  }
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, h);
  const vis = visibleTree(+$('depth').value, +$('cap').value);
  view.drawn = [];
  if (vis) {
    const root = hierarchy(vis.root, (d) => d.children);
    tidyTree().nodeSize([ROW, COL]).separation((a, b) => (a.parent === b.parent ? 1 : 1.3))(root);
    // Each edge as long as its label.
    root.eachBefore((d) => {
      d.label = labelOf(d.data);
      if (d.parent) d.y = d.parent.y + Math.max(COL / 2, d.label.length * CHAR + 16);
    });
    view.layoutRoot = root;
    if (!view.userMoved) fit(root, w, h);
    draw(ctx, root, w, h);
  }
  const t1 = performance.now();
  metrics.renders.push(t1 - t0);
  for (const t of metrics.pending) metrics.updates.push(t1 - t);
  metrics.pending = [];
  renderCounters(vis ? vis.drawn : 0);
}

// fit scales the tree into the canvas, but not below a readable zoom: a
// larger tree is placed so that the best plan's end is in view.
function fit(root, w, h) {
  let minX = Infinity, maxX = -Infinity, maxY = 0;
  let best = null;
  root.each((d) => {
    minX = Math.min(minX, d.x);
    maxX = Math.max(maxX, d.x);
    maxY = Math.max(maxY, d.y);
    if (d.data.n.id === model.best) best = d;
  });
  const tw = maxY + 120;
  const th = maxX - minX + ROW * 2;
  view.scale = Math.min(1.3, Math.max(view.fitAll ? 0.02 : 0.8, Math.min((w - 40) / tw, (h - 40) / th)));
  view.x = 20;
  view.y = h / 2 - ((minX + maxX) / 2) * view.scale;
  const focus = best || root;
  if (tw * view.scale > w - 40) view.x = Math.min(20, w - 160 - focus.y * view.scale);
  if (th * view.scale > h - 40) view.y = h / 2 - focus.x * view.scale;
}

function labelOf(data) {
  if (data.n.id === 0) return 'prompt';
  let t = show(data.text);
  if (t.length > LABEL) t = t.slice(0, LABEL - 1) + '…';
  return t;
}

const colors = () => {
  const s = getComputedStyle(document.documentElement);
  const c = (k) => s.getPropertyValue('--' + k).trim();
  return { open: c('open'), goal: c('goal'), terminal: c('terminal'), dead: c('dead'), best: c('best'), line: '#c4cad1', fg: '#1d232b' };
};
let palette = null;

function draw(ctx, root, w, h) {
  palette = palette || colors();
  const s = view.scale;
  const sx = (d) => view.x + d.y * s;
  const sy = (d) => view.y + d.x * s;
  const onBest = new Set();
  for (let n = model.nodes.get(model.best); n; n = model.nodes.get(n.parent)) onBest.add(n.id);
  const nodes = root.descendants();
  const inView = (x, y) => x > -20 && x < w + 20 && y > -20 && y < h + 20;
  const edge = (d) => {
    const x0 = sx(d.parent), y0 = sy(d.parent), x1 = sx(d), y1 = sy(d);
    if (!inView(x1, y1) && !inView(x0, y0) && !inView(x1, y0)) return;
    ctx.moveTo(x0, y0);
    ctx.lineTo(x0 + 6 * s, y1);
    ctx.lineTo(x1, y1);
  };
  // Edges: ordinary ones in one path, the best path on top.
  ctx.lineWidth = 1;
  ctx.strokeStyle = palette.line;
  ctx.beginPath();
  for (const d of nodes) if (d.parent && !onBest.has(d.data.n.id)) edge(d);
  ctx.stroke();
  ctx.lineWidth = 3;
  ctx.strokeStyle = palette.best;
  ctx.beginPath();
  for (const d of nodes) if (d.parent && onBest.has(d.data.n.id)) edge(d);
  ctx.stroke();
  // Nodes, then edge labels above their edges where they are legible.
  const maxVisits = Math.max(1, model.nodes.get(0)?.visits || 1);
  const fontPx = 12 * s;
  ctx.font = `${fontPx.toFixed(1)}px ui-monospace, Menlo, monospace`;
  ctx.textBaseline = 'bottom';
  view.drawn = [];
  for (const d of nodes) {
    const n = d.data.n;
    const x = sx(d), y = sy(d);
    const best = onBest.has(n.id);
    if (fontPx >= 6.5 && inView(x, y)) {
      ctx.fillStyle = best ? palette.best : palette.fg;
      // Edge labels sit above their edge; the root's below it.
      if (d.parent) ctx.fillText(d.label, sx(d.parent) + 8 * s, y - 2 * s);
      else ctx.fillText(d.label, x - 8, y + 16 * s);
    }
    if (!inView(x, y)) continue;
    const r = Math.max(1.5, (2 + 5 * Math.sqrt(n.visits / maxVisits)) * s);
    view.drawn.push({ id: n.id, x, y, r: Math.max(r, 5) });
    ctx.beginPath();
    ctx.arc(x, y, r, 0, 2 * Math.PI);
    ctx.fillStyle = palette[n.kind] || palette.open;
    ctx.globalAlpha = n.exhausted && n.kind === 'open' ? 0.45 : 1;
    ctx.fill();
    ctx.globalAlpha = 1;
    if (best) {
      ctx.lineWidth = 2;
      ctx.strokeStyle = palette.best;
      ctx.stroke();
    }
    if (d.data.hidden > 0 && fontPx >= 6.5) {
      ctx.fillStyle = palette.dead;
      ctx.textBaseline = 'middle';
      ctx.fillText(`+${d.data.hidden}`, x + r + 2, y);
      ctx.textBaseline = 'bottom';
    }
  }
}

// show makes an edge's text visible: newlines as ⏎, and spaces at either
// end (token boundaries) as ·.
function show(t) {
  return t.replace(/\n/g, '⏎').replace(/^ +| +$/g, (m) => '·'.repeat(m.length));
}

function renderCounters(drawn) {
  const root = model.nodes.get(0);
  $('counters').textContent =
    `${model.simulations} simulations · ${model.nodes.size} nodes received (${model.treeNodes} in the tree) · ${drawn} drawn` +
    (root ? ` · root visits ${root.visits}` : '');
}

function renderBest() {
  const ol = $('best');
  const plan = model.bestPlan;
  if (ol.dataset.key === plan.join('\n')) return;
  ol.dataset.key = plan.join('\n');
  ol.replaceChildren(...plan.map((a) => li(a)));
  $('bestGoal').textContent = model.bestGoal ? 'reaches the goal' : plan.length ? '(goal not reached)' : '';
  $('bestGoal').className = model.bestGoal ? 'yes' : 'pending';
}

function li(text, state) {
  const el = document.createElement('li');
  if (state) {
    const det = document.createElement('details');
    const sum = document.createElement('summary');
    sum.textContent = text;
    const st = document.createElement('div');
    st.className = 'state';
    st.textContent = state.join(' ');
    det.append(sum, st);
    el.append(det);
  } else {
    el.textContent = text;
  }
  return el;
}

function renderResult(res, err) {
  lastResult = res;
  const plan = res ? res.plan : [];
  $('plan').replaceChildren(...plan.map((a, i) => li(a, res.states && res.states[i + 1])));
  const rows = res
    ? [
        ['valid', res.valid],
        ['goal reached', res.goal_reached],
        ['revalidated', res.revalidated],
        ['stop reason', res.stop_reason],
        ['actions', res.plan.length],
        ['simulations', res.simulations || 0],
        ['prompt tokens', res.prompt_tokens],
        ['generated tokens', res.generated_tokens],
        ['evaluated tokens', res.evaluated_tokens],
        ['model calls', res.model_calls],
        ['plan seconds', res.timings ? res.timings.plan_seconds.toFixed(2) : ''],
      ]
    : [];
  if (res && res.validation_error) rows.push(['validation error', res.validation_error]);
  if (res && res.goal_error) rows.push(['goal error', res.goal_error]);
  $('cert').replaceChildren(
    ...rows.map(([k, v]) => {
      const tr = document.createElement('tr');
      const a = document.createElement('td');
      const b = document.createElement('td');
      a.textContent = k;
      if (typeof v === 'boolean') {
        b.textContent = v ? 'yes' : 'no';
        b.className = v ? 'yes' : 'no';
      } else b.textContent = v;
      tr.append(a, b);
      return tr;
    }),
  );
  $('error').hidden = !err;
  $('error').textContent = err ? `${err.code}: ${err.error}` : '';
}

function setStatus(text, cls) {
  const s = $('status');
  s.textContent = text;
  s.className = cls || '';
}

function headers() {
  const h = { 'Content-Type': 'application/json' };
  const tok = $('token').value.trim();
  if (tok) h.Authorization = 'Bearer ' + tok;
  return h;
}

// request builds the POST /v1/plan body from the form.
function request() {
  const src = $('source').value;
  const req = { method: $('method').value, stream: true, tree: true, trace: true };
  if ($('model').value) req.model = $('model').value;
  const secs = +$('seconds').value;
  if (secs > 0) req.seconds = secs;
  const sims = +$('simulations').value;
  if (sims > 0) req.simulations = sims;
  const seed = +$('seed').value;
  if (seed > 0) {
    req.search = { seed };
    req.sampling = { seed };
  }
  if (src.startsWith('env:')) {
    // env:<name>:<task id> (a task id may hold colons).
    const rest = src.slice(4);
    const i = rest.indexOf(':');
    req.env = rest.slice(0, i);
    req.task = rest.slice(i + 1);
  } else {
    req.domain = $('domain').value;
    req.problem = $('problem').value;
  }
  return req;
}

// run streams one plan request into the view.
async function run(ev) {
  ev?.preventDefault();
  if (controller) controller.abort();
  controller = new AbortController();
  resetModel();
  renderResult(null, null);
  $('best').replaceChildren();
  $('best').dataset.key = '';
  $('start').disabled = true;
  $('stop').disabled = false;
  setStatus('starting…', 'running');
  const started = performance.now();
  try {
    const resp = await fetch('/v1/plan', { method: 'POST', headers: headers(), body: JSON.stringify(request()), signal: controller.signal });
    if (!resp.ok) {
      const e = await resp.json().catch(() => ({ code: resp.status, error: resp.statusText }));
      renderResult(e.result || null, e);
      setStatus(`failed (${resp.status})`, 'failed');
      return;
    }
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (line.trim()) handle(JSON.parse(line), started);
      }
    }
  } catch (e) {
    if (e.name !== 'AbortError') {
      renderResult(null, { code: 'client', error: String(e) });
      setStatus('failed', 'failed');
    } else setStatus('stopped');
  } finally {
    $('start').disabled = false;
    $('stop').disabled = true;
    controller = null;
  }
}

function handle(ev, started) {
  switch (ev.event) {
    case 'start':
      setStatus(`running ${ev.method} on ${ev.model} (${ev.task.actions} ground actions)`, 'running');
      break;
    case 'search':
      if (ev.tree) applyDelta(ev.tree);
      setStatus(`searching · ${ev.seconds.toFixed(1)} s · ${ev.evaluated_tokens || 0} tokens evaluated`, 'running');
      break;
    case 'action':
      break;
    case 'result':
      renderResult(ev.result, null);
      setStatus(`done in ${((performance.now() - started) / 1000).toFixed(1)} s: ${ev.result.goal_reached ? 'goal reached' : 'goal not reached'}`, 'done');
      break;
    case 'error':
      renderResult(ev.error.result || null, ev.error);
      setStatus(`failed: ${ev.error.code}`, 'failed');
      break;
  }
}

async function loadChoices() {
  const src = $('source');
  try {
    const r = await fetch('/ui/tasks.json', { headers: headers() });
    const t = await r.json();
    window.nesyTasks = t;
    for (const ex of t.examples || []) {
      const o = new Option(`example: ${ex.name}`, 'example:' + ex.name);
      src.add(o);
    }
    for (const env of t.envs || []) {
      const g = document.createElement('optgroup');
      g.label = env.name;
      for (const task of env.tasks) g.append(new Option(`${env.name}: ${task}`, `env:${env.name}:${task}`));
      src.append(g);
    }
  } catch (e) {
    setStatus('could not list tasks: ' + e, 'failed');
  }
  src.add(new Option('paste PDDL…', 'paste'));
  src.onchange = onSource;
  onSource();
  try {
    const r = await fetch('/v1/models', { headers: headers() });
    const m = await r.json();
    for (const x of m.models || []) $('model').add(new Option(x.name + (x.source === 'default' ? ' (default)' : ''), x.name, x.source === 'default', x.source === 'default'));
  } catch (e) {
    /* the server's default model is used */
  }
}

function onSource() {
  const v = $('source').value;
  const pddl = !v.startsWith('env:');
  $('pddl').hidden = !pddl;
  if (v.startsWith('example:')) {
    const ex = (window.nesyTasks.examples || []).find((e) => 'example:' + e.name === v);
    $('domain').value = ex.domain;
    $('problem').value = ex.problem;
  }
}

// Pan, zoom, hover and select on the canvas.
function interact() {
  const c = $('tree');
  let drag = null;
  c.addEventListener('mousedown', (e) => {
    drag = { x: e.clientX, y: e.clientY, vx: view.x, vy: view.y, moved: false };
    c.style.cursor = 'grabbing';
  });
  window.addEventListener('mouseup', (e) => {
    if (drag && !drag.moved) select(e);
    drag = null;
    c.style.cursor = 'grab';
  });
  window.addEventListener('mousemove', (e) => {
    if (drag) {
      const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
      if (drag.moved) {
        view.x = drag.vx + dx;
        view.y = drag.vy + dy;
        view.userMoved = true;
        schedule();
      }
      return;
    }
    if (e.target === c) hover(e);
  });
  c.addEventListener(
    'wheel',
    (e) => {
      e.preventDefault();
      const r = c.getBoundingClientRect();
      const mx = e.clientX - r.left, my = e.clientY - r.top;
      const k = Math.exp(-e.deltaY * 0.0015);
      const ns = Math.min(4, Math.max(0.02, view.scale * k));
      view.x = mx - ((mx - view.x) * ns) / view.scale;
      view.y = my - ((my - view.y) * ns) / view.scale;
      view.scale = ns;
      view.userMoved = true;
      schedule();
    },
    { passive: false },
  );
  c.addEventListener('mouseleave', () => ($('tip').hidden = true));
  window.addEventListener('resize', schedule);
}

function nodeAt(e) {
  const r = $('tree').getBoundingClientRect();
  const x = e.clientX - r.left, y = e.clientY - r.top;
  let best = null, bd = Infinity;
  for (const d of view.drawn) {
    const dd = (d.x - x) ** 2 + (d.y - y) ** 2;
    if (dd < bd && dd <= (d.r + 3) ** 2) {
      best = d;
      bd = dd;
    }
  }
  return best && { ...best, x, y };
}

function describe(id) {
  const n = model.nodes.get(id);
  if (!n) return '';
  return `node ${n.id} · ${n.kind}${n.exhausted ? ' (exhausted)' : ''}\nvisits ${n.visits} · value ${n.value.toFixed(3)} · prior ${n.prior.toFixed(3)} · ${n.actions} actions\n\n${prefixOf(id) || '(the prompt)'}`;
}

function hover(e) {
  const hit = nodeAt(e);
  const tip = $('tip');
  if (!hit) {
    tip.hidden = true;
    return;
  }
  tip.hidden = false;
  tip.textContent = describe(hit.id);
  tip.style.left = Math.min(hit.x + 14, $('tree').clientWidth - 300) + 'px';
  tip.style.top = hit.y + 14 + 'px';
}

function select(e) {
  const hit = nodeAt(e);
  if (hit) $('selected').textContent = describe(hit.id);
}

function init() {
  $('form').addEventListener('submit', run);
  $('stop').onclick = () => controller && controller.abort();
  $('fit').onclick = () => {
    view.userMoved = false;
    view.fitAll = true;
    schedule();
  };
  for (const [id, out] of [['depth', 'depthOut'], ['cap', 'capOut']]) {
    $(id).addEventListener('input', () => {
      $(out).textContent = $(id).value;
      schedule();
    });
  }
  interact();
  loadChoices();
  schedule();
}

// The hooks the browser test and curious users reach from the console.
window.nesyUI = {
  applyDelta,
  reset: resetModel,
  metrics,
  model,
  prefixOf,
  get lastResult() {
    return lastResult;
  },
  run,
};

init();
