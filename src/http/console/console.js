// Pincer's web console (docs/console.md). Served from /ui/assets; the only
// script the pages load (the Content-Security-Policy allows no other).
//
// Rules this file keeps: everything shown that came from the server (a
// model's reply, a tool's output, a chat message, a file name) goes into the
// page as text (`textContent`, text nodes), never as markup; links point
// only at the console's own addresses, built here; changes carry the page's
// CSRF token; the bearer token is never seen here (the session cookie is
// HttpOnly).
'use strict';

(() => {
  const csrfMeta = document.querySelector('meta[name="pincer-csrf"]');
  const csrf = csrfMeta ? csrfMeta.getAttribute('content') : '';
  const app = document.getElementById('app');
  const announcer = document.getElementById('announce');

  // ---- building the page from text ------------------------------------

  /** An element with attributes and children; strings become text nodes. */
  function h(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name === 'text') node.textContent = String(value);
      else if (name === 'class') node.className = value;
      else if (name.startsWith('on')) node.addEventListener(name.slice(2), value);
      else if (name === 'href') node.setAttribute('href', internal(value));
      else node.setAttribute(name, value === true ? '' : String(value));
    }
    append(node, children);
    return node;
  }

  function append(node, children) {
    for (const child of children.flat(Infinity)) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  /** Only the console's own addresses become links. */
  function internal(href) {
    const text = String(href);
    return text.startsWith('/ui/') ? text : '/ui/sessions';
  }

  function clear(node) {
    while (node.firstChild) node.firstChild.remove();
  }

  function announce(text) {
    if (announcer) announcer.textContent = text;
  }

  function when(ms) {
    if (ms === null || ms === undefined) return '';
    return new Date(ms).toLocaleString();
  }

  function duration(ms) {
    if (ms === null || ms === undefined) return '';
    return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
  }

  function json(value) {
    try {
      return JSON.stringify(value, null, 2);
    } catch (_) {
      return String(value);
    }
  }

  function cost(value) {
    if (!value) return '';
    return `${Number(value.amount).toFixed(4)} ${value.currency}`;
  }

  function tokens(usage) {
    if (!usage) return '';
    return `${usage.input_tokens || 0} in / ${usage.output_tokens || 0} out`;
  }

  function errorBox(err) {
    return h('p', { class: 'error', role: 'alert', text: err && err.message ? err.message : String(err) });
  }

  // ---- talking to the server ------------------------------------------

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  async function api(method, path, body) {
    const init = { method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
    if (method !== 'GET') init.headers['X-CSRF-Token'] = csrf;
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const response = await fetch(path, init);
    if (response.status === 401) {
      window.location.assign('/ui/login');
      throw new ApiError(401, 'unauthorized', 'logged out');
    }
    const text = await response.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch (_) {
      data = null;
    }
    if (!response.ok) {
      const error = data && data.error ? data.error : {};
      throw new ApiError(response.status, error.code || 'error', error.message || `${response.status} ${response.statusText}`);
    }
    return data;
  }

  const seg = encodeURIComponent;

  // ---- the waiting badge and desktop notifications ---------------------

  const badge = document.getElementById('waiting-badge');
  let known = new Set();
  let firstPoll = true;

  async function pollWaiting() {
    try {
      const [approvals, questions] = await Promise.all([api('GET', '/v1/approvals'), api('GET', '/v1/questions')]);
      const items = [
        ...approvals.approvals.map((r) => ({ id: r.approval_id, title: r.title || r.tool || 'A tool call' })),
        ...questions.questions.map((r) => ({ id: r.question_id, title: r.question || 'A question' })),
      ];
      if (badge) {
        badge.textContent = items.length ? String(items.length) : '';
        badge.hidden = items.length === 0;
        badge.setAttribute('aria-label', `${items.length} waiting for an answer`);
      }
      const now = new Set(items.map((item) => item.id));
      if (!firstPoll && 'Notification' in window && Notification.permission === 'granted') {
        for (const item of items) {
          if (!known.has(item.id)) new Notification('Pincer: waiting for you', { body: item.title, tag: item.id });
        }
      }
      known = now;
      firstPoll = false;
    } catch (_) {
      // The next poll tries again; a logged-out browser has been sent away.
    }
  }

  // ---- sessions --------------------------------------------------------

  /** The filters the sessions page sends the server (`GET /v1/sessions`). */
  const SESSION_FILTERS = ['q', 'workspace', 'origin', 'state', 'channel'];

  async function sessionsView() {
    document.title = 'Sessions · Pincer';
    // The filters live in the page's address, so a filtered listing can be
    // shared and reloaded; the form submits to it.
    const params = new URLSearchParams(window.location.search);
    const filters = Object.fromEntries(SESSION_FILTERS.map((name) => [name, (params.get(name) || '').trim()]));
    let channels = [];
    try {
      channels = (await api('GET', '/v1/channels')).channels.map((channel) => channel.name);
    } catch (_) {
      // Without the channels' names the filter still takes the one asked for.
    }
    if (filters.channel && !channels.includes(filters.channel)) channels.push(filters.channel);
    const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter sessions' },
      h('label', {}, 'Search ', h('input', { name: 'q', type: 'search', value: filters.q, placeholder: 'title, id, model, path' })),
      h('label', {}, 'Workspace ', h('input', { name: 'workspace', value: filters.workspace, placeholder: '/absolute/path' })),
      h('label', {}, 'Origin ', select('origin', filters.origin, ['', 'editor', 'headless', 'terminal', 'http', 'channel', 'schedule'])),
      h('label', {}, 'State ', select('state', filters.state, ['', 'open', 'closed'])),
      h('label', {}, 'Channel ', select('channel', filters.channel, ['', ...channels])),
      h('button', { type: 'submit' }, 'Filter'));
    const body = h('tbody');
    const table = h('table', { class: 'list' },
      h('caption', { class: 'visually-hidden' }, 'Sessions, newest first'),
      h('thead', {}, h('tr', {}, ['Title', 'Origin', 'Workspace', 'Model', 'Mode', 'Updated'].map((name) => h('th', { scope: 'col' }, name)))),
      body);
    const more = h('button', { type: 'button', hidden: true }, 'Load more');
    const status = h('p', { class: 'status', role: 'status' });
    clear(app);
    append(app, [h('h1', {}, 'Sessions'), newSessionForm(), form, status, table, more]);
    let cursor = null;
    let shown = 0;
    // Each page asks the server with the same filters, after the last one's
    // cursor: the server filters, so every page is full while more match.
    const load = async () => {
      more.disabled = true;
      const query = new URLSearchParams({ limit: '100' });
      for (const name of SESSION_FILTERS) {
        if (filters[name]) query.set(name, filters[name]);
      }
      if (cursor) query.set('cursor', cursor);
      try {
        const page = await api('GET', `/v1/sessions?${query}`);
        for (const session of page.sessions) {
          shown += 1;
          body.append(h('tr', {},
            h('td', {}, h('a', { href: `/ui/sessions/${seg(session.session_id)}` }, session.title || session.session_id)),
            h('td', {}, session.origin),
            h('td', { class: 'path' }, session.workspace),
            h('td', {}, `${session.provider}/${session.model}`),
            h('td', {}, session.mode),
            h('td', {}, when(session.updated_at), session.closed ? ' (closed)' : '')));
        }
        cursor = page.next_cursor;
        more.hidden = !cursor;
        status.textContent = shown ? `${shown} shown` : 'No sessions match.';
      } catch (err) {
        more.hidden = true;
        status.replaceWith(errorBox(err));
      } finally {
        more.disabled = false;
      }
    };
    more.addEventListener('click', load);
    await load();
  }

  /** Starts a session in a directory of the server's machine. */
  function newSessionForm() {
    const workspace = h('input', { id: 'new-workspace', name: 'workspace', required: true, placeholder: '/absolute/path' });
    const mode = select('mode', '', ['', 'read_only', 'supervised', 'full']);
    mode.id = 'new-mode';
    const feedback = h('p', { class: 'status', role: 'status' });
    return h('details', { class: 'new-session' }, h('summary', {}, 'New session'),
      h('form', {
        onsubmit: async (event) => {
          event.preventDefault();
          const body = { workspace: workspace.value.trim() };
          if (mode.value) body.mode = mode.value;
          try {
            const session = await api('POST', '/v1/sessions', body);
            window.location.assign(`/ui/sessions/${seg(session.session_id)}`);
          } catch (err) {
            feedback.textContent = `Not started: ${err.message}`;
          }
        },
      }, h('div', { class: 'filters' },
        h('label', { for: 'new-workspace' }, 'Workspace', workspace),
        h('label', { for: 'new-mode' }, 'Mode', mode),
        h('button', { type: 'submit' }, 'Start')), feedback));
  }

  function select(name, current, options) {
    return h('select', { name }, options.map((value) => h('option', { value, selected: value === current }, value || 'any')));
  }

  // ---- one session: the live transcript --------------------------------

  /** Draws a session's events as they come; one per run section. */
  class Transcript {
    constructor(root, sessionId, onRun) {
      this.root = root;
      this.sessionId = sessionId;
      this.onRun = onRun;
      this.runs = new Map();
      this.calls = new Map();
      this.pending = [];
      this.scheduled = false;
    }

    push(record) {
      this.pending.push(record);
      if (!this.scheduled) {
        this.scheduled = true;
        window.requestAnimationFrame(() => this.flush());
      }
    }

    flush() {
      this.scheduled = false;
      const batch = this.pending;
      this.pending = [];
      for (const record of batch) {
        try {
          this.draw(record);
        } catch (err) {
          console.warn('cannot draw an event', record.type, err);
        }
      }
    }

    run(record) {
      let run = this.runs.get(record.run_id);
      if (!run) {
        const state = h('span', { class: 'state' }, 'queued');
        const usage = h('span', { class: 'usage' });
        const header = h('header', {},
          h('a', { href: `/ui/runs/${seg(record.run_id)}` }, `Run ${record.run_id}`), ' ', state, ' ', usage);
        const body = h('div', { class: 'run-body' });
        const section = h('section', { class: 'run', 'data-run': record.run_id, 'aria-label': `Run ${record.run_id}` }, header, body);
        this.root.append(section);
        run = { section, body, state, usage, text: null, thought: null };
        this.runs.set(record.run_id, run);
      }
      return run;
    }

    draw(record) {
      const run = this.run(record);
      const type = record.type;
      if (type !== 'text_delta') run.text = null;
      if (type !== 'thought_delta') run.thought = null;
      switch (type) {
        case 'state': {
          run.state.textContent = record.state + (record.stop_reason ? ` (${record.stop_reason})` : '');
          run.state.className = `state ${record.state}`;
          if (record.error) run.body.append(h('p', { class: 'error' }, record.error));
          if (record.usage) run.usage.textContent = `${tokens(record.usage)}${record.cost ? `, ${cost(record.cost)}` : ''}`;
          this.onRun(record);
          break;
        }
        case 'user_message':
          run.body.append(h('div', { class: 'message user', 'aria-label': 'Prompt' },
            (record.content || []).map((part) => h('p', {}, part.text !== undefined ? part.text : `${part.type}: ${part.uri || part.name || ''}`))));
          break;
        case 'text_delta': {
          if (!run.text) {
            run.text = document.createTextNode('');
            run.body.append(h('div', { class: 'message assistant', 'aria-label': 'Reply' }, run.text));
          }
          run.text.appendData(record.text);
          break;
        }
        case 'thought_delta': {
          if (!run.thought) {
            run.thought = document.createTextNode('');
            run.body.append(h('details', { class: 'thought' }, h('summary', {}, 'Thinking'), h('p', {}, run.thought)));
          }
          run.thought.appendData(record.text);
          break;
        }
        case 'tool_call': {
          const result = h('div', { class: 'result' });
          const planned = h('div', { class: 'planned' });
          const verdict = h('span', { class: 'verdict' });
          const box = h('details', { class: 'tool', 'data-call': record.id },
            h('summary', {}, h('code', {}, record.name), ' ', record.kind ? `(${record.kind}) ` : '', verdict),
            h('pre', { class: 'arguments', 'aria-label': 'Arguments' }, json(record.arguments)), planned, result);
          run.body.append(box);
          this.calls.set(record.id, { box, result, planned, verdict });
          break;
        }
        case 'tool_planned': {
          const call = this.calls.get(record.id);
          if (!call) break;
          if (record.title) call.box.querySelector('summary').append(` ${record.title}`);
          if (record.command) call.planned.append(h('pre', { class: 'command' }, record.command));
          for (const diff of record.diffs || []) call.planned.append(diffView(diff));
          break;
        }
        case 'tool_progress': {
          const call = this.calls.get(record.id);
          if (call && record.output) call.result.append(h('pre', { class: 'progress' }, record.output));
          break;
        }
        case 'tool_result': {
          const call = this.calls.get(record.id);
          if (!call) break;
          call.verdict.textContent = record.is_error ? `${record.verdict || 'error'} ✗` : `${record.verdict || 'done'} ✓`;
          call.box.classList.add(record.is_error ? 'failed' : 'done');
          for (const diff of record.diffs || []) call.result.append(diffView(diff));
          call.result.append(h('pre', { class: 'output', 'aria-label': 'Output' }, record.output));
          break;
        }
        case 'approval_requested':
          run.body.append(approvalCard(record, true));
          break;
        case 'approval_decided': {
          const card = document.querySelector(`[data-approval="${CSS.escape(record.approval_id)}"]`);
          if (card) settle(card, `Decided: ${record.decision}`);
          break;
        }
        case 'question_asked':
          run.body.append(questionCard(record, true));
          break;
        case 'question_answered': {
          const card = document.querySelector(`[data-question="${CSS.escape(record.question_id)}"]`);
          if (card) settle(card, `${record.outcome}${record.answer ? `: ${record.answer}` : ''}`);
          break;
        }
        case 'plan':
          run.body.append(h('div', { class: 'plan', 'aria-label': 'Plan' }, h('strong', {}, 'Plan'),
            h('ul', {}, (record.entries || []).map((entry) => h('li', { class: entry.status }, `[${entry.status}] ${entry.content}`)))));
          break;
        case 'usage':
          run.usage.textContent = `${tokens(record.usage)}${record.cost ? `, ${cost(record.cost)}` : ''}${record.context ? `, context ${record.context.used}/${record.context.size}` : ''}`;
          break;
        case 'notice':
          run.body.append(h('p', { class: 'notice' }, record.message));
          break;
        case 'retrying':
          run.body.append(h('p', { class: 'notice' }, `Retrying (${record.reason}), attempt ${record.attempt} of ${record.attempts}`));
          break;
        case 'compaction':
          run.body.append(h('p', { class: 'notice' }, `Compaction ${record.status}${record.summary ? `: ${record.summary}` : ''}${record.error ? `: ${record.error}` : ''}`));
          break;
        case 'session_info':
          if (record.title) document.title = `${record.title} · Pincer`;
          break;
        case 'skill_activated':
          run.body.append(h('p', { class: 'notice' }, `Skill ${record.name} activated`));
          break;
        case 'subagent_started':
          run.body.append(h('p', { class: 'notice' }, 'Subagent ', h('a', { href: `/ui/sessions/${seg(record.session_id)}` }, record.task || record.session_id), ' started'));
          break;
        default:
          break;
      }
    }
  }

  function diffView(diff) {
    return h('figure', { class: 'diff' }, h('figcaption', {}, diff.path), h('pre', {}, diff.unified || ''));
  }

  function settle(card, text) {
    for (const control of card.querySelectorAll('button, input, textarea')) control.disabled = true;
    const outcome = card.querySelector('.outcome');
    if (outcome) outcome.textContent = text;
    card.classList.add('settled');
  }

  function approvalCard(record, inline) {
    const outcome = h('p', { class: 'outcome', role: 'status' });
    const choose = (decision) => async (event) => {
      const card = event.target.closest('.approval');
      for (const control of card.querySelectorAll('button')) control.disabled = true;
      try {
        const answered = await api('POST', `/v1/approvals/${seg(record.approval_id)}`, { decision });
        settle(card, `Decided: ${answered.decision}`);
        announce(`Approval answered: ${answered.decision}`);
        pollWaiting();
      } catch (err) {
        settle(card, err.status === 409 || err.status === 404 ? `Already settled: ${err.message}` : `Failed: ${err.message}`);
      }
    };
    return h('article', { class: 'approval', 'data-approval': record.approval_id, 'aria-label': `Approval: ${record.title || record.tool}` },
      h('h3', {}, record.title || record.tool),
      inline ? null : h('p', {}, 'Session ', h('a', { href: `/ui/sessions/${seg(record.session_id)}` }, record.session_id)),
      record.reason ? h('p', {}, record.reason) : null,
      record.command ? h('pre', { class: 'command' }, record.command) : null,
      (record.diffs || []).map(diffView),
      h('details', {}, h('summary', {}, 'Arguments'), h('pre', {}, json(record.arguments))),
      h('div', { class: 'actions' },
        h('button', { type: 'button', class: 'allow', onclick: choose('allow_once') }, 'Allow once'),
        h('button', { type: 'button', onclick: choose('allow_always') }, 'Allow always'),
        h('button', { type: 'button', class: 'reject', onclick: choose('reject_once') }, 'Reject'),
        h('button', { type: 'button', onclick: choose('reject_always') }, 'Reject always')),
      outcome);
  }

  function questionCard(record, inline) {
    const outcome = h('p', { class: 'outcome', role: 'status' });
    const id = `answer-${record.question_id}`;
    const send = async (body, card) => {
      for (const control of card.querySelectorAll('button, input')) control.disabled = true;
      try {
        const replied = await api('POST', `/v1/questions/${seg(record.question_id)}`, body);
        settle(card, `${replied.outcome}${replied.answer ? `: ${replied.answer}` : ''}`);
        announce('Question answered');
        pollWaiting();
      } catch (err) {
        settle(card, err.status === 409 || err.status === 404 ? `Already settled: ${err.message}` : `Failed: ${err.message}`);
      }
    };
    const input = h('input', { id, name: 'answer', autocomplete: 'off' });
    const form = h('form', {
      class: 'answer',
      onsubmit: (event) => {
        event.preventDefault();
        if (input.value.trim()) send({ answer: input.value }, event.target.closest('.question'));
      },
    }, h('label', { for: id }, 'Answer'), input, h('button', { type: 'submit' }, 'Send'),
    h('button', { type: 'button', onclick: (event) => send({ decline: true }, event.target.closest('.question')) }, 'Decline'));
    return h('article', { class: 'question', 'data-question': record.question_id, 'aria-label': 'Question' },
      h('h3', {}, record.question),
      inline ? null : h('p', {}, 'Session ', h('a', { href: `/ui/sessions/${seg(record.session_id)}` }, record.session_id)),
      (record.options || []).length ? h('div', { class: 'actions' }, record.options.map((option) =>
        h('button', { type: 'button', onclick: (event) => send({ answer: option }, event.target.closest('.question')) }, option))) : null,
      form, outcome);
  }

  async function sessionView(id) {
    let session;
    try {
      session = await api('GET', `/v1/sessions/${seg(id)}`);
    } catch (err) {
      clear(app);
      append(app, [h('h1', {}, 'Session'), errorBox(err)]);
      return;
    }
    document.title = `${session.title || session.session_id} · Pincer`;
    const transcript = h('div', { class: 'transcript', 'aria-live': 'off' });
    const live = h('span', { class: 'live', role: 'status' }, 'connecting…');
    let running = null;
    const cancel = h('button', { type: 'button', class: 'reject', disabled: true }, 'Cancel run');
    const steer = h('button', { type: 'button', disabled: true }, 'Steer');
    const promptBox = h('textarea', { id: 'prompt', name: 'prompt', rows: 3, required: true });
    const feedback = h('p', { class: 'status', role: 'status' });
    const onRun = (record) => {
      const ended = ['completed', 'cancelled', 'failed'].includes(record.state);
      if (!ended) running = record.run_id;
      else if (running === record.run_id) running = null;
      cancel.disabled = !running;
      steer.disabled = !running;
    };
    const view = new Transcript(transcript, session.session_id, onRun);
    const promptForm = h('form', {
      class: 'prompt',
      onsubmit: async (event) => {
        event.preventDefault();
        const text = promptBox.value;
        if (!text.trim()) return;
        try {
          const run = await api('POST', `/v1/sessions/${seg(id)}/prompt`, { prompt: text });
          promptBox.value = '';
          feedback.textContent = `Queued run ${run.run_id}`;
        } catch (err) {
          feedback.textContent = `Not sent: ${err.message}`;
        }
      },
    }, h('label', { for: 'prompt' }, 'Prompt'), promptBox,
    h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Send'), steer, cancel), feedback);
    steer.addEventListener('click', async () => {
      const text = promptBox.value;
      if (!text.trim()) {
        feedback.textContent = 'Write the steering message in the prompt box first';
        return;
      }
      try {
        const steered = await api('POST', `/v1/sessions/${seg(id)}/steer`, { prompt: text });
        promptBox.value = '';
        feedback.textContent = steered.outcome === 'injected' ? 'Steered: taken in at the next turn' : 'No run is working: send it as a prompt';
      } catch (err) {
        feedback.textContent = `Not steered: ${err.message}`;
      }
    });
    cancel.addEventListener('click', async () => {
      if (!running) return;
      try {
        const run = await api('POST', `/v1/runs/${seg(running)}/cancel`);
        feedback.textContent = `Run ${run.run_id} ${run.state}`;
      } catch (err) {
        feedback.textContent = `Not cancelled: ${err.message}`;
      }
    });
    const command = (name, label) => h('button', {
      type: 'button',
      onclick: async () => {
        try {
          const run = await api('POST', `/v1/sessions/${seg(id)}/commands`, { command: name });
          feedback.textContent = `${label}: queued as run ${run.run_id}`;
        } catch (err) {
          feedback.textContent = `${label} not queued: ${err.message}`;
        }
      },
    }, label);
    const remove = h('button', {
      type: 'button',
      class: 'reject',
      onclick: async () => {
        if (!window.confirm('Delete this session? Its conversation and tapes go; run summaries and receipts stay.')) return;
        try {
          await api('DELETE', `/v1/sessions/${seg(id)}`);
          window.location.assign('/ui/sessions');
        } catch (err) {
          feedback.textContent = `Not deleted: ${err.message}`;
        }
      },
    }, 'Delete session');
    const context = h('details', {
      class: 'context',
      ontoggle: async (event) => {
        if (!event.target.open || event.target.dataset.loaded) return;
        event.target.dataset.loaded = '1';
        try {
          const view = await api('GET', `/v1/sessions/${seg(id)}/context`);
          event.target.append(contextView(view));
        } catch (err) {
          event.target.append(errorBox(err));
        }
      },
    }, h('summary', {}, 'What the model is sent (/context)'));
    const memory = h('details', {
      class: 'memory-panel',
      ontoggle: (event) => {
        if (!event.target.open || event.target.dataset.loaded) return;
        event.target.dataset.loaded = '1';
        memoryView(id, event.target);
      },
    }, h('summary', {}, 'Memory this session recalls from'));
    clear(app);
    append(app, [
      h('h1', {}, session.title || 'Untitled session'),
      h('dl', { class: 'facts' },
        fact('Session', session.session_id), fact('Workspace', session.workspace), fact('Origin', session.origin),
        fact('Model', `${session.provider}/${session.model}`), fact('Mode', session.mode),
        fact('Created', when(session.created_at)), session.closed ? fact('State', 'closed') : null,
        session.parent ? fact('Parent', h('a', { href: `/ui/sessions/${seg(session.parent.session_id)}` }, session.parent.session_id)) : null),
      h('div', { class: 'actions' }, command('compact', 'Compact'), command('undo', 'Undo last edits'), remove, live),
      context,
      memory,
      h('h2', {}, 'Transcript'),
      transcript,
      promptForm,
    ]);
    const source = new EventSource(`/v1/sessions/${seg(id)}/events?from=start`);
    source.onopen = () => { live.textContent = 'live'; };
    source.onerror = () => { live.textContent = 'reconnecting…'; };
    source.onmessage = (message) => {
      let record;
      try {
        record = JSON.parse(message.data);
      } catch (_) {
        return;
      }
      view.push(record);
    };
  }

  function fact(name, value) {
    return [h('dt', {}, name), h('dd', {}, value)];
  }

  /** What the session's next model turn is sent, as `/context` shows it. */
  function contextView(view) {
    const messages = (view.messages || []).map((message, index) => {
      const tokensOf = (view.message_tokens || [])[index];
      let body = '';
      if (message.role === 'user') body = (message.content || []).map((part) => part.text || part.uri || part.type).join('\n');
      else if (message.role === 'assistant') body = [message.text, ...(message.tool_calls || []).map((call) => `→ ${call.name} ${json(call.arguments)}`)].filter(Boolean).join('\n');
      else if (message.role === 'tool') body = message.content;
      else body = message.text || '';
      return h('li', { class: `context-message ${message.role}` },
        h('strong', {}, message.role), tokensOf !== undefined ? ` (${tokensOf} tokens)` : '', h('pre', {}, body));
    });
    return h('div', {},
      h('p', {}, `${view.total_tokens} tokens of a ${view.window}-token window (${view.window_from}), counted ${view.counted_by}: system ${view.system_tokens}, tools ${view.tool_tokens}, ${(view.messages || []).length} messages${view.dropped ? `, ${view.dropped} oldest dropped to fit` : ''}${view.shortened ? `, ${view.shortened} tool outputs shortened` : ''}`),
      h('details', {}, h('summary', {}, 'System prompt (with pinned memory)'), h('pre', { class: 'system-prompt' }, view.system)),
      h('details', {}, h('summary', {}, `Tools (${(view.tools || []).length})`), h('ul', {}, (view.tools || []).map((tool) => h('li', {}, h('code', {}, tool.name), ' ', tool.description || '')))),
      h('details', {}, h('summary', {}, 'Messages (memory recalled for the latest prompt is in it)'), h('ol', { class: 'context-messages' }, messages)));
  }

  /** What the session can recall: the items of its person, workspace and conversation. */
  async function memoryView(id, target) {
    try {
      const listing = await api('GET', `/v1/memory?session_id=${seg(id)}&limit=100`);
      if (!listing.items.length) {
        target.append(h('p', {}, 'Nothing remembered that this session sees.'));
        return;
      }
      target.append(h('ul', { class: 'memory' }, listing.items.map((item) => h('li', {},
        h('span', { class: 'scope' }, `[${item.scope}${item.pinned ? ', pinned' : ''}] `), item.text))));
    } catch (err) {
      target.append(errorBox(err));
    }
  }

  // ---- approvals and questions -----------------------------------------

  async function waitingView() {
    document.title = 'Waiting · Pincer';
    const list = h('div', { class: 'waiting' });
    const notify = 'Notification' in window && Notification.permission !== 'granted'
      ? h('button', {
        type: 'button',
        onclick: async (event) => {
          const permission = await Notification.requestPermission();
          event.target.textContent = permission === 'granted' ? 'Desktop notifications on' : 'Desktop notifications refused';
          event.target.disabled = true;
        },
      }, 'Notify me on this desktop')
      : null;
    clear(app);
    append(app, [h('h1', {}, 'Waiting for an answer'), notify, list]);
    const drawn = new Set();
    const refresh = async () => {
      try {
        const [approvals, questions] = await Promise.all([api('GET', '/v1/approvals'), api('GET', '/v1/questions')]);
        const ids = new Set();
        for (const record of approvals.approvals) {
          ids.add(record.approval_id);
          if (!drawn.has(record.approval_id)) {
            drawn.add(record.approval_id);
            list.append(approvalCard(record, false));
          }
        }
        for (const record of questions.questions) {
          ids.add(record.question_id);
          if (!drawn.has(record.question_id)) {
            drawn.add(record.question_id);
            list.append(questionCard(record, false));
          }
        }
        for (const card of list.querySelectorAll('[data-approval], [data-question]')) {
          const key = card.dataset.approval || card.dataset.question;
          if (!ids.has(key) && !card.classList.contains('settled')) settle(card, 'Settled elsewhere');
        }
        const empty = list.querySelector('.empty');
        if (!ids.size && !empty && !list.querySelector('article')) list.append(h('p', { class: 'empty' }, 'Nothing is waiting.'));
        if (ids.size && empty) empty.remove();
      } catch (err) {
        list.replaceChildren(errorBox(err));
      }
    };
    await refresh();
    window.setInterval(refresh, 2000);
  }

  // ---- a run's tape ----------------------------------------------------

  async function runView(id) {
    document.title = `Run ${id} · Pincer`;
    clear(app);
    append(app, [h('h1', {}, `Run ${id}`)]);
    try {
      const [run, tape] = await Promise.all([api('GET', `/v1/runs/${seg(id)}`), api('GET', `/v1/runs/${seg(id)}/tape`)]);
      const verify = h('p', { class: 'verify', role: 'status' }, 'Checking the receipt chain…');
      append(app, [
        h('dl', { class: 'facts' },
          fact('Session', h('a', { href: `/ui/sessions/${seg(run.session_id)}` }, run.session_id)),
          fact('State', `${run.state}${run.stop_reason ? ` (${run.stop_reason})` : ''}`),
          run.error ? fact('Error', run.error) : null,
          fact('Tokens', tokens(run.usage)), run.cost ? fact('Cost', cost(run.cost)) : null,
          fact('Started', when(run.started_at)),
          fact('Took', run.started_at && run.ended_at ? duration(run.ended_at - run.started_at) : '')),
        verify,
        h('h2', {}, 'Tape'),
        timeline(tape.events),
      ]);
      api('GET', '/v1/verify').then((verdict) => {
        verify.textContent = verdict.ok
          ? `Receipt chain intact: ${verdict.receipts} receipts`
          : `Receipt chain NOT intact: ${verdict.broken ? `broken at ${verdict.broken.seq}: ${verdict.broken.problem}` : `${verdict.missing.length} runs miss receipts`}`;
        verify.className = verdict.ok ? 'verify ok' : 'verify broken';
      }).catch((err) => { verify.textContent = `Receipt chain not checked: ${err.message}`; });
    } catch (err) {
      app.append(errorBox(err));
    }
  }

  function timeline(events) {
    const start = events.length ? events[0].at : 0;
    return h('ol', { class: 'timeline' }, events.map((record) => h('li', { class: `event ${record.type}` },
      h('span', { class: 'seq' }, `#${record.seq}`), ' ',
      h('span', { class: 'at' }, `+${duration(record.at - start)}`), ' ',
      h('strong', {}, record.type), ' ',
      h('span', { class: 'summary' }, summary(record)))));
  }

  function summary(record) {
    switch (record.type) {
      case 'state': return `${record.state}${record.stop_reason ? ` (${record.stop_reason})` : ''}${record.error ? `: ${record.error}` : ''}`;
      case 'user_message': return (record.content || []).map((part) => part.text || part.uri || part.type).join(' ');
      case 'text_delta': case 'thought_delta': return record.text;
      case 'tool_call': return `${record.name} ${json(record.arguments)}`;
      case 'tool_result': return `${record.verdict || ''} ${record.output}`;
      case 'approval_requested': return record.title || record.tool;
      case 'approval_decided': return record.decision;
      case 'question_asked': return record.question;
      case 'question_answered': return `${record.outcome} ${record.answer || ''}`;
      case 'usage': return `${tokens(record.usage)} ${record.model || ''}`;
      case 'model_turn': return `${record.provider}/${record.model}`;
      case 'notice': return record.message;
      default: return '';
    }
  }

  // ---- channels --------------------------------------------------------

  /** A channel's messages left unknown_after_send, each with the three decisions. */
  async function unknownView(name) {
    const section = h('section', { class: 'unknown', 'aria-label': `Messages of ${name} that may or may not have arrived` },
      h('h3', {}, 'May or may not have arrived'),
      h('p', { class: 'notice' }, 'The platform took these messages and no answer came, so Pincer cannot tell whether the chat shows them, and does not resend them blindly. Check the chat, then decide: ',
        h('strong', {}, 'Arrived'), ' records the message sent (the person saw it); ',
        h('strong', {}, 'Send again'), ' has the process serving the channel send it again (it did not arrive); ',
        h('strong', {}, 'Drop'), ' leaves it unsent (cancelled).'));
    let listing;
    try {
      listing = await api('GET', `/v1/channels/${seg(name)}/outbox?status=unknown_after_send&limit=100`);
    } catch (err) {
      section.append(errorBox(err));
      return section;
    }
    for (const intent of listing.intents) {
      const outcome = h('p', { class: 'outcome', role: 'status' });
      const decide = (resolve) => async (event) => {
        const card = event.target.closest('article');
        for (const control of card.querySelectorAll('button')) control.disabled = true;
        try {
          const now = await api('POST', `/v1/channels/${seg(name)}/outbox/${seg(intent.id)}`, { resolve });
          settle(card, `Recorded: ${resolve} (now ${now.status})`);
          announce(`Message ${intent.id}: ${resolve}`);
        } catch (err) {
          settle(card, err.status === 409 || err.status === 404 ? `Already settled: ${err.message}` : `Failed: ${err.message}`);
        }
      };
      section.append(h('article', { class: 'intent', 'data-intent': intent.id, 'aria-label': `Message ${intent.id}` },
        h('blockquote', {}, intent.excerpt || '(no text)'),
        h('p', {}, `To ${intent.to}, ${intent.kind}, decided ${when(intent.created_at)}, last tried ${when(intent.updated_at)}`),
        intent.failure ? h('p', { class: 'why' }, intent.failure.message) : null,
        h('p', {}, h('code', {}, intent.id)),
        h('div', { class: 'actions' },
          h('button', { type: 'button', class: 'allow', onclick: decide('arrived') }, 'Arrived'),
          intent.kind === 'draft' ? null : h('button', { type: 'button', onclick: decide('resend') }, 'Send again'),
          h('button', { type: 'button', class: 'reject', onclick: decide('drop') }, 'Drop')),
        outcome));
    }
    return section;
  }

  /** Who may talk to a channel: its allow list, whether pairing is open, and its paired senders, each revocable. */
  async function pairsView(name) {
    const section = h('section', { class: 'pairs', 'aria-label': `Who may talk to ${name}` },
      h('h3', {}, 'Who may talk here'));
    let listing;
    try {
      listing = await api('GET', `/v1/channels/${seg(name)}/pairs`);
    } catch (err) {
      section.append(errorBox(err));
      return section;
    }
    section.append(h('dl', { class: 'facts' },
      fact('Allowed', listing.allow.length ? listing.allow.join(', ') : 'nobody by name'),
      fact('Pairing', listing.pairing_open
        ? 'open: a person who sends /pair with the operator\'s code is paired (the code is never shown here)'
        : 'closed: no pairing code is set')));
    if (!listing.pairs.length) {
      section.append(h('p', {}, 'No paired senders.'));
      return section;
    }
    const revoke = (pair) => async (event) => {
      const row = event.target.closest('tr');
      event.target.disabled = true;
      const cell = row.querySelector('.outcome');
      try {
        await api('DELETE', `/v1/channels/${seg(name)}/pairs/${seg(pair.sender)}`);
        cell.textContent = 'Revoked: their next message is a stranger\'s';
        announce(`${pair.sender} revoked on ${name}`);
      } catch (err) {
        cell.textContent = err.status === 404 ? `Already revoked: ${err.message}` : `Failed: ${err.message}`;
        if (err.status !== 404) event.target.disabled = false;
      }
    };
    section.append(h('table', { class: 'list pairs' }, h('caption', {}, 'Paired senders'),
      h('thead', {}, h('tr', {}, ['Sender', 'Account', 'Paired', ''].map((title) => h('th', { scope: 'col' }, title)))),
      h('tbody', {}, listing.pairs.map((pair) => h('tr', { 'data-sender': pair.sender },
        h('td', {}, h('code', {}, pair.sender)),
        h('td', {}, pair.account),
        h('td', {}, when(pair.paired_at)),
        h('td', {},
          h('button', { type: 'button', class: 'reject', 'aria-label': `Revoke ${pair.sender}`, onclick: revoke(pair) }, 'Revoke'),
          h('span', { class: 'outcome', role: 'status' })))))));
    return section;
  }

  async function channelsView() {
    document.title = 'Channels · Pincer';
    clear(app);
    append(app, [h('h1', {}, 'Channels')]);
    try {
      const listing = await api('GET', '/v1/channels');
      if (!listing.channels.length) app.append(h('p', {}, 'No chat channel is configured.'));
      for (const channel of listing.channels) {
        const outbox = Object.entries(channel.outbox || {});
        app.append(h('section', { class: 'channel', 'aria-label': `Channel ${channel.name}` },
          h('h2', {}, `${channel.name} `, h('small', {}, channel.kind || '')),
          h('dl', { class: 'facts' },
            fact('Account', channel.account),
            fact('Serving here', channel.serving ? 'yes' : 'no'),
            fact('Connected', channel.connected === null || channel.connected === undefined
              ? 'not yet'
              : `${channel.connected ? 'yes' : 'no'}${channel.since ? ` since ${when(channel.since)}` : ''}`),
            channel.last_event_at ? fact('Last message in', when(channel.last_event_at)) : null,
            channel.last_error ? fact('Last error', `${channel.last_error}${channel.last_error_at ? ` (${when(channel.last_error_at)})` : ''}`) : null),
          h('table', { class: 'list outbox' }, h('caption', {}, 'Outbox by state'),
            h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'State'), h('th', { scope: 'col' }, 'Messages'))),
            h('tbody', {}, outbox.length ? outbox.map(([state, count]) => h('tr', { class: state },
              h('td', {}, state), h('td', {}, String(count)))) : h('tr', {}, h('td', { colspan: 2 }, 'Empty')))),
          (channel.outbox || {}).unknown_after_send ? await unknownView(channel.name) : null,
          await pairsView(channel.name),
          h('details', {}, h('summary', {}, 'Everything the server reports'), h('pre', {}, json(channel)))));
      }
    } catch (err) {
      app.append(errorBox(err));
    }
    try {
      const schedules = await api('GET', '/v1/schedules');
      app.append(h('h2', {}, 'Schedules'));
      if (!schedules.schedules.length) app.append(h('p', {}, 'No schedules.'));
      else {
        app.append(h('table', { class: 'list' },
          h('thead', {}, h('tr', {}, ['Id', 'When', 'Next', 'Last fire', 'Delivers to'].map((name) => h('th', { scope: 'col' }, name)))),
          h('tbody', {}, schedules.schedules.map((entry) => {
            const schedule = entry.schedule || entry;
            return h('tr', {},
              h('td', {}, schedule.id || schedule.schedule_id || ''),
              h('td', {}, schedule.cron || schedule.at || json(schedule.when)),
              h('td', {}, entry.next || ''),
              h('td', {}, entry.last_fire ? `${entry.last_fire.state} ${entry.last_fire.occurrence || ''}` : ''),
              h('td', {}, schedule.deliver ? json(schedule.deliver) : ''));
          }))));
      }
    } catch (err) {
      if (err.status !== 404) app.append(errorBox(err));
    }
  }

  // ---- health ----------------------------------------------------------

  async function healthView() {
    document.title = 'Health · Pincer';
    clear(app);
    append(app, [h('h1', {}, 'Health')]);
    try {
      const response = await fetch('/readyz', { credentials: 'same-origin' });
      app.append(h('p', { class: response.ok ? 'verify ok' : 'verify broken' }, response.ok ? 'Ready: the store answers' : `Not ready (${response.status})`));
    } catch (err) {
      app.append(errorBox(err));
    }
    try {
      const summary = await api('GET', '/v1/health/summary?window=1h');
      app.append(windowSection(summary));
      if (summary.instances) app.append(instancesSection(summary.instances));
    } catch (err) {
      app.append(errorBox(err));
    }
    try {
      const metrics = await fetch('/metrics', { credentials: 'same-origin' });
      const text = await metrics.text();
      const rows = text.split('\n').filter((line) => line && !line.startsWith('#')).map((line) => {
        const cut = line.lastIndexOf(' ');
        return h('tr', {}, h('td', { class: 'path' }, line.slice(0, cut)), h('td', {}, line.slice(cut + 1)));
      });
      app.append(h('details', { class: 'metrics' }, h('summary', {}, 'Counters since this process started (/metrics)'),
        h('table', { class: 'list' },
          h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Metric'), h('th', { scope: 'col' }, 'Value'))), h('tbody', {}, rows))));
    } catch (err) {
      app.append(errorBox(err));
    }
  }

  function windowName(secs) {
    if (secs % 3600 === 0) return secs === 3600 ? 'hour' : `${secs / 3600} hours`;
    return `${Math.round(secs / 60)} minutes`;
  }

  function clock(ms) {
    return new Date(ms).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  }

  /** The runs of the summary's window: figures, then a bar per bucket. */
  function windowSection(summary) {
    const runs = summary.runs;
    const states = Object.entries(runs.by_state).filter(([, n]) => n > 0).map(([state, n]) => `${n} ${state}`);
    const latency = runs.latency_ms;
    const costs = runs.cost.map(cost).join(', ');
    return h('section', { class: 'health-window', 'aria-labelledby': 'health-window' },
      h('h2', { id: 'health-window' }, `The last ${windowName(summary.window_secs)}`),
      h('p', { class: 'hint' }, `Runs created since ${when(summary.since)}, in every session${summary.store === 'postgres' ? ' and by every instance' : ''}.`),
      h('dl', { class: 'facts' },
        fact('Runs', h('span', { class: 'runs-total' }, String(runs.total))),
        fact('By state', states.length ? states.join(', ') : 'none'),
        fact('Failures', h('span', { class: runs.failures ? 'state failed' : '' }, String(runs.failures))),
        fact('Latency', latency.runs
          ? `p50 ${duration(latency.p50)}, p95 ${duration(latency.p95)} (of ${latency.runs} ended)`
          : 'no run ended'),
        fact('Tokens', `${runs.input_tokens} in / ${runs.output_tokens} out`),
        fact('Cost', costs || 'nothing priced')),
      bars(summary));
  }

  /** A bar per bucket, its height the bucket's runs against the busiest;
   * the failed part in its own colour. Heights are set through the CSSOM
   * (the policy forbids style attributes, not this). */
  function bars(summary) {
    const most = Math.max(1, ...summary.buckets.map((b) => b.runs));
    const minutes = Math.round(summary.bucket_secs / 60);
    const items = summary.buckets.map((bucket) => {
      const label = `${clock(bucket.start)}: ${bucket.runs} run${bucket.runs === 1 ? '' : 's'}${bucket.failed ? `, ${bucket.failed} failed` : ''}`;
      const bar = h('span', { class: 'bar' });
      bar.style.height = `${(100 * bucket.runs) / most}%`;
      if (bucket.failed) {
        const failed = h('span', { class: 'failed' });
        failed.style.height = `${(100 * bucket.failed) / bucket.runs}%`;
        bar.append(failed);
      }
      return h('li', { title: label }, bar, h('span', { class: 'visually-hidden' }, label));
    });
    return h('figure', { class: 'bars' },
      h('figcaption', {}, `Runs per ${minutes} minutes (failed ones in red), from ${clock(summary.since)} to ${clock(summary.until)}; the tallest bar is ${most} run${most === 1 ? '' : 's'}`),
      h('ol', {}, items));
  }

  /** The instances sharing a PostgreSQL store. */
  function instancesSection(instances) {
    return h('section', { class: 'instances', 'aria-labelledby': 'health-instances' },
      h('h2', { id: 'health-instances' }, 'Instances sharing the store'),
      h('table', { class: 'list' },
        h('thead', {}, h('tr', {}, ['Instance', 'Host', 'Started', 'Lease until', 'Open runs'].map((name) => h('th', { scope: 'col' }, name)))),
        h('tbody', {}, instances.map((instance) => h('tr', { class: instance.answering ? 'answering' : null },
          h('td', { class: 'path' }, instance.instance_id, instance.answering ? h('strong', {}, ' (this one)') : null),
          h('td', {}, instance.host),
          h('td', {}, when(instance.started_at)),
          h('td', {}, when(instance.lease_expires_at)),
          h('td', {}, String(instance.open_runs)))))));
  }

  // ---- routing ---------------------------------------------------------

  const routes = [
    [/^\/ui\/sessions\/?$/, 'sessions', () => sessionsView()],
    [/^\/ui\/sessions\/([^/]+)$/, 'sessions', (id) => sessionView(decodeURIComponent(id))],
    [/^\/ui\/approvals\/?$/, 'approvals', () => waitingView()],
    [/^\/ui\/runs\/([^/]+)$/, 'sessions', (id) => runView(decodeURIComponent(id))],
    [/^\/ui\/channels\/?$/, 'channels', () => channelsView()],
    [/^\/ui\/health\/?$/, 'health', () => healthView()],
  ];

  function start() {
    const path = window.location.pathname;
    for (const [pattern, nav, view] of routes) {
      const found = path.match(pattern);
      if (!found) continue;
      for (const link of document.querySelectorAll('[data-nav]')) {
        if (link.dataset.nav === nav) link.setAttribute('aria-current', 'page');
      }
      view(...found.slice(1)).catch((err) => app.append(errorBox(err)));
      pollWaiting();
      window.setInterval(pollWaiting, 3000);
      return;
    }
    clear(app);
    append(app, [h('h1', {}, 'No such page'), h('p', {}, h('a', { href: '/ui/sessions' }, 'Sessions'))]);
  }

  start();
})();
