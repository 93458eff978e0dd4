-- Headless test of Pincer in the real avante.nvim (Neovim 0.11):
--   PINCER_BIN=target/debug/pincer AVANTE_SNAPSHOT=../shared/third_party/avante.nvim \
--     nvim --headless -u NONE -i NONE -c "luafile editors/neovim/test/avante.lua"
-- AVANTE_SNAPSHOT holds the tarballs of avante.nvim and its two required
-- dependencies, nui.nvim and plenary.nvim (its README); the test unpacks them
-- into a temporary directory and puts them on the runtimepath. It loads
-- editors/neovim/examples/avante.lua (the configuration docs/editors.md
-- quotes: `acp_providers` with require("pincer").avante_provider(),
-- `behaviour.auto_approve_tool_permissions = false`) with `pincer` on PATH and
-- a scripted model, opens avante's sidebar on a file and talks to Pincer as a
-- user would, through the sidebar's input and its permission buttons: a reply streams into the sidebar; a new file and an edit each wait
-- for the person, are allowed with the sidebar's "Allow once" button, and land
-- on disk as planned; the second prompt continues the same Pincer session,
-- whose title is the first prompt's words; Pincer answered no request with an
-- error, and Neovim showed none.
-- Exit code 0 when everything passed; the last line is "N passed, M failed".

local here = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h")
local plugin_root = vim.fn.fnamemodify(here, ":h")
local repo_root = vim.fn.fnamemodify(plugin_root, ":h:h")
local snippet = plugin_root .. "/examples/avante.lua"

local passed, failed = 0, 0

local function out(text)
  io.stdout:write(text .. "\n")
  io.stdout:flush()
end

local function finish()
  out(string.format("%d passed, %d failed", passed, failed))
  os.exit(failed == 0 and 0 or 1)
end

local function abort(message)
  out("FAIL " .. message)
  failed = failed + 1
  finish()
end

local function expect(condition, message)
  if not condition then
    error(message, 2)
  end
end

-- Diagnostics added to a failure: filled in below once they exist.
local diagnostics = function()
  return ""
end

local function test(name, fn)
  local ok, err = pcall(fn)
  if ok then
    passed = passed + 1
    out("ok   " .. name)
  else
    failed = failed + 1
    out("FAIL " .. name .. "\n     " .. (tostring(err) .. diagnostics()):gsub("\n", "\n     "))
  end
end

if vim.fn.has("nvim-0.11") ~= 1 then
  abort("avante.nvim needs Neovim 0.11 or later; this is " .. tostring(vim.version()))
end

local bin = os.getenv("PINCER_BIN")
if bin == nil or bin == "" then
  abort("PINCER_BIN is not set: point it at the built pincer binary")
end
bin = vim.fn.fnamemodify(bin, ":p")
if vim.fn.executable(bin) ~= 1 then
  abort("PINCER_BIN=" .. bin .. " is not an executable file: build it first (cargo build)")
end
local snapshot = os.getenv("AVANTE_SNAPSHOT")
if snapshot == nil or snapshot == "" then
  abort("AVANTE_SNAPSHOT is not set: point it at the directory of avante.nvim's tarballs")
end
snapshot = vim.fn.fnamemodify(snapshot, ":p"):gsub("/$", "")

-- An isolated world: its own home, XDG directories (Pincer's config and data,
-- Neovim's state and log directories, where avante keeps its history),
-- `pincer` on PATH, and a workspace holding the file open in the editor and
-- the file to edit.
local tmp = vim.fn.tempname()
vim.fn.mkdir(tmp, "p")
local function write(path, lines)
  vim.fn.mkdir(vim.fn.fnamemodify(path, ":h"), "p")
  vim.fn.writefile(lines, path)
end
local function read_file(path)
  if vim.fn.filereadable(path) ~= 1 then
    return nil
  end
  local file = io.open(path, "rb")
  local text = file:read("*a")
  file:close()
  return text
end

-- The plugins, unpacked from the snapshot's tarballs (one directory each).
local plugins = {}
for _, name in ipairs({ "avante.nvim", "nui.nvim", "plenary.nvim" }) do
  local tarballs = vim.fn.glob(snapshot .. "/" .. name .. "-*.tar.gz", false, true)
  if #tarballs ~= 1 then
    abort(string.format("AVANTE_SNAPSHOT=%s has %d %s-*.tar.gz, expected one", snapshot, #tarballs, name))
  end
  local unpacked = vim.system({ "tar", "-xzf", tarballs[1], "-C", tmp }, { text = true }):wait()
  if unpacked.code ~= 0 then
    abort("tar -xzf " .. tarballs[1] .. ": " .. unpacked.stderr)
  end
  plugins[name] = tmp .. "/" .. name
end

for _, name in ipairs({ "PINCER_CONFIG", "PINCER_DATA_DIR", "PINCER_PROVIDER", "PINCER_MODEL", "PINCER_MODE" }) do
  vim.env[name] = nil
end
vim.env.HOME = tmp .. "/home"
vim.env.XDG_CONFIG_HOME = tmp .. "/config"
vim.env.XDG_DATA_HOME = tmp .. "/data"
vim.env.XDG_STATE_HOME = tmp .. "/state"
vim.env.XDG_CACHE_HOME = tmp .. "/cache"
for _, dir in ipairs({ vim.env.HOME, vim.env.XDG_DATA_HOME, vim.env.XDG_STATE_HOME, vim.fn.stdpath("log"), vim.env.XDG_CACHE_HOME }) do
  vim.fn.mkdir(dir, "p")
end
vim.fn.mkdir(tmp .. "/bin", "p")
vim.uv.fs_symlink(bin, tmp .. "/bin/pincer")
vim.env.PATH = tmp .. "/bin:" .. vim.env.PATH

-- The model's turns, one line each (docs/scripted-provider.md), counted per
-- session: the first prompt's reply in two chunks, then its new file and the
-- reply after it; the second prompt's edit of notes.txt and the reply after
-- it. A new session would start again at line 1. A pause before each tool
-- call, as a real model takes: avante (sidebar.lua, its deferred cursor
-- placement under the permission buttons) raises "Cursor position outside
-- buffer" when a permission request arrives within 100 ms of the sidebar's
-- first render, before the buttons are drawn.
local REPLY_1 = "Hello from Pincer, first turn"
local REPLY_2 = "I wrote hello.txt"
local REPLY_3 = "I changed notes.txt"
local HELLO = "Hello, file\n"
write(tmp .. "/script.jsonl", {
  vim.json.encode({
    { text = "Hello from " },
    { text = "Pincer, first turn" },
    { delay_ms = 400 },
    { tool_call = { name = "write_file", arguments = { path = "hello.txt", content = HELLO } } },
  }),
  vim.json.encode({ { text = REPLY_2 } }),
  vim.json.encode({
    { text = "Editing the notes." },
    { delay_ms = 400 },
    { tool_call = { name = "edit_file", arguments = {
      path = "notes.txt",
      edits = { { old_text = "status: draft", new_text = "status: final" } },
    } } },
  }),
  vim.json.encode({ { text = REPLY_3 } }),
})
write(vim.env.XDG_CONFIG_HOME .. "/pincer/config.toml", {
  'provider = "demo"',
  "[providers.demo]",
  'kind = "scripted"',
  'script = "' .. tmp .. '/script.jsonl"',
})
local workspace = tmp .. "/workspace"
write(workspace .. "/main.lua", { "print('the file open in the editor')" })
write(workspace .. "/notes.txt", { "# Notes", "status: draft" })
vim.cmd.cd(vim.fn.fnameescape(workspace))

vim.opt.runtimepath:prepend(plugins["plenary.nvim"])
vim.opt.runtimepath:prepend(plugins["nui.nvim"])
vim.opt.runtimepath:prepend(plugins["avante.nvim"])
vim.opt.runtimepath:prepend(plugin_root)
-- What a plugin manager does after putting a plugin on the runtimepath.
vim.cmd("runtime! plugin/**/*.lua plugin/**/*.vim")

-- Every message shown to the user, to fail on errors.
local notifications = {}
vim.notify = function(msg, level, opts)
  table.insert(notifications, { msg = tostring(msg), level = level or vim.log.levels.INFO })
end

-- Every JSON-RPC message between avante and Pincer, in order, seen through
-- avante's own ACP client (observed, then passed on unchanged).
local rpc = {}
local ACPClient = require("avante.libs.acp_client")
local real_handle_message = ACPClient._handle_message
ACPClient._handle_message = function(self, message)
  table.insert(rpc, { from = "pincer", message = message })
  return real_handle_message(self, message)
end
for _, method in ipairs({ "_send_request", "_send_notification", "_send_result", "_send_error" }) do
  local real = ACPClient[method]
  ACPClient[method] = function(self, ...)
    table.insert(rpc, { from = "avante", method = method, args = { ... } })
    return real(self, ...)
  end
end

local function wait_for(what, timeout_ms, condition)
  local ok = vim.wait(timeout_ms, condition, 20)
  expect(ok, string.format("timed out after %d ms waiting for %s", timeout_ms, what))
end

-- Headless Neovim writes "-- INSERT --" to stdout, between the results.
vim.o.showmode = false
-- The file a person has open when they open avante's sidebar, then the
-- snippet, as a user's init.lua runs it.
vim.cmd.edit("main.lua")
local loaded, load_err = pcall(dofile, snippet)
if not loaded then
  abort("loading " .. snippet .. ": " .. tostring(load_err))
end

local sidebar
diagnostics = function()
  local parts = {}
  if sidebar and sidebar.containers and sidebar.containers.result and vim.api.nvim_buf_is_valid(sidebar.containers.result.bufnr) then
    table.insert(parts, "--- avante's sidebar\n" .. table.concat(vim.api.nvim_buf_get_lines(sidebar.containers.result.bufnr, 0, -1, false), "\n"))
  end
  local seen = {}
  for _, entry in ipairs(rpc) do
    local line = entry.from .. ": " .. vim.inspect(entry.message or entry.args, { newline = " ", indent = "" })
    table.insert(seen, #line > 600 and line:sub(1, 600) .. "…" or line)
  end
  table.insert(parts, "--- JSON-RPC\n" .. table.concat(seen, "\n"))
  local messages = {}
  for _, n in ipairs(notifications) do
    table.insert(messages, n.level .. ": " .. n.msg)
  end
  table.insert(parts, "--- notifications\n" .. table.concat(messages, "\n"))
  return "\n" .. table.concat(parts, "\n")
end

local function result_text()
  return table.concat(vim.api.nvim_buf_get_lines(sidebar.containers.result.bufnr, 0, -1, false), "\n")
end

-- Pincer's requests and notifications of one method.
local function from_pincer(method)
  local found = {}
  for _, entry in ipairs(rpc) do
    if entry.from == "pincer" and entry.message.method == method then
      table.insert(found, entry.message)
    end
  end
  return found
end

local function prompt_responses()
  local n = 0
  for _, entry in ipairs(rpc) do
    if entry.from == "pincer" and entry.message.result and entry.message.result.stopReason then
      n = n + 1
    end
  end
  return n
end

-- Type `text` into the sidebar's input and submit it with avante's key for
-- it (in normal mode), as a user does. Returns a function that waits for
-- Pincer's answer.
local function submit(text)
  local before = prompt_responses()
  local input = sidebar.containers.input
  vim.api.nvim_set_current_win(input.winid)
  expect(vim.api.nvim_buf_get_lines(input.bufnr, 0, -1, false)[1] == "", "the input is not empty")
  vim.api.nvim_feedkeys("i" .. text .. vim.keycode("<Esc>"), "nx", false)
  expect(vim.api.nvim_buf_get_lines(input.bufnr, 0, -1, false)[1] == text, "typing into avante's input failed")
  vim.api.nvim_feedkeys(vim.keycode(require("avante.config").mappings.submit.normal), "mx", false)
  return function()
    wait_for("the answer to " .. vim.inspect(text), 30000, function()
      return prompt_responses() > before
    end)
  end
end

-- The "Allow once" button avante shows under a tool call waiting for the
-- person: the cursor put on the button row in the sidebar, <Tab> until the
-- button has the focus, <CR>, as a user does.
local function allow_once()
  wait_for("avante's permission buttons", 30000, function()
    return sidebar.permission_button_options ~= nil and result_text():find("Waiting for Confirmation", 1, true) ~= nil
  end)
  local index
  for i, button in ipairs(sidebar.permission_button_options) do
    if button.name == "Allow once" then
      index = i
    end
  end
  expect(index, "no \"Allow once\" button among " .. vim.inspect(sidebar.permission_button_options))
  local result = sidebar.containers.result
  vim.api.nvim_set_current_win(result.winid)
  local row
  for i, line in ipairs(vim.api.nvim_buf_get_lines(result.bufnr, 0, -1, false)) do
    if line:find("Waiting for Confirmation", 1, true) then
      row = i
    end
  end
  vim.api.nvim_win_set_cursor(result.winid, { row, 0 })
  vim.api.nvim_feedkeys(vim.keycode(string.rep("<Tab>", index - 1) .. "<CR>"), "mx", false)
end

-- The options avante answered Pincer's permission requests with, in order.
local function permission_answers()
  local answers = {}
  for _, entry in ipairs(rpc) do
    local result = entry.from == "avante" and entry.method == "_send_result" and entry.args[2]
    if type(result) == "table" and result.outcome then
      table.insert(answers, result.outcome.optionId)
    end
  end
  return answers
end

local function on_disk(name)
  return read_file(workspace .. "/" .. name)
end

-- The fs/read_text_file requests for `name` and avante's answers, in order:
-- { content = TEXT } or { error = CODE }.
local function reads_of(name)
  local path = workspace .. "/" .. name
  local ids, answers = {}, {}
  for _, entry in ipairs(rpc) do
    if entry.from == "pincer" and entry.message.method == "fs/read_text_file" and entry.message.params.path == path then
      ids[entry.message.id] = true
    elseif entry.from == "avante" and ids[entry.args[1]] then
      ids[entry.args[1]] = nil
      if entry.method == "_send_result" then
        table.insert(answers, { content = entry.args[2].content })
      elseif entry.method == "_send_error" then
        table.insert(answers, { error = entry.args[3] })
      end
    end
  end
  return answers
end

local session_id

local function read_text(path)
  return read_file(path) or ""
end

test("docs/editors.md quotes the configuration this test loads, as it is", function()
  local doc = read_text(repo_root .. "/docs/editors.md")
  expect(doc ~= "", "docs/editors.md is missing")
  expect(doc:find("```lua\n" .. read_text(snippet) .. "```\n", 1, true),
    "docs/editors.md does not quote " .. snippet .. " in a ```lua block")
end)

test("the snippet makes Pincer avante's provider, launched in supervised mode, asking the person", function()
  local config = require("avante.config")
  expect(config.provider == "pincer", "avante's provider: " .. vim.inspect(config.provider))
  local entry = config.acp_providers.pincer
  expect(entry and entry.command == "pincer", "the entry: " .. vim.inspect(entry))
  expect(vim.deep_equal(entry.args, { "acp", "--mode", "supervised" }), "the entry's args: " .. vim.inspect(entry.args))
  expect(config.behaviour.auto_approve_tool_permissions == false,
    "auto_approve_tool_permissions is " .. vim.inspect(config.behaviour.auto_approve_tool_permissions))
end)

test("avante's sidebar opens and connects to Pincer (the acp_providers entry, one session)", function()
  vim.cmd("AvanteAsk")
  sidebar = require("avante").get()
  expect(sidebar and sidebar:is_open(), ":AvanteAsk did not open the sidebar")
  -- Opening the sidebar connects at once: initialize, session/new.
  wait_for("the ACP session", 20000, function()
    return sidebar.acp_client ~= nil and sidebar.chat_history.acp_session_id ~= nil
  end)
  session_id = sidebar.chat_history.acp_session_id
  expect(session_id:match("^ses_"), "not a Pincer session: " .. session_id)
  expect(sidebar.acp_client.config.command == "pincer", "avante launched " .. vim.inspect(sidebar.acp_client.config.command))
end)

test("a reply streams into avante's sidebar", function()
  submit("Say hello")
  wait_for("the reply", 30000, function()
    return result_text():find(REPLY_1, 1, true) ~= nil
  end)
  local chunks = {}
  for _, note in ipairs(from_pincer("session/update")) do
    if note.params.update.sessionUpdate == "agent_message_chunk" then
      table.insert(chunks, note.params.update.content.text)
    end
  end
  expect(vim.deep_equal({ chunks[1], chunks[2] }, { "Hello from ", "Pincer, first turn" }),
    "the reply came as " .. vim.inspect(chunks))
end)

test("a new file waits for avante's \"Allow once\" button, then is on disk as planned", function()
  -- What the person sees before answering: the tool call, nothing written.
  wait_for("the permission request", 30000, function()
    return #from_pincer("session/request_permission") == 1
  end)
  expect(on_disk("hello.txt") == nil, "hello.txt was written before the answer")
  wait_for("the call's title in the sidebar", 5000, function()
    return result_text():find("Create hello.txt", 1, true) ~= nil
  end)
  allow_once()
  wait_for("the reply after the new file", 30000, function()
    return prompt_responses() == 1
  end)
  expect(vim.deep_equal(permission_answers(), { "allow_once" }), "avante answered " .. vim.inspect(permission_answers()))
  expect(on_disk("hello.txt") == HELLO, "hello.txt holds " .. vim.inspect(on_disk("hello.txt")))
  expect(result_text():find(REPLY_2, 1, true), "the reply after the write is not in the sidebar")
  -- avante followed the edit into a buffer: Pincer planned the file from the
  -- disk (not there: -32002) and read it again from the buffer (""), before
  -- writing it through avante (fs/write_text_file).
  expect(vim.fn.bufloaded(workspace .. "/hello.txt") == 1, "avante did not open hello.txt in a buffer")
  local reads = reads_of("hello.txt")
  expect(vim.deep_equal(reads, { { error = -32002 }, { content = "" } }), "reads of hello.txt: " .. vim.inspect(reads))
  expect(#from_pincer("fs/write_text_file") == 1, "Pincer did not write through avante")
end)

test("an edit in the next prompt waits for the button too, and lands with the file's final newline", function()
  -- avante follows an edit's location at most once in 200 ms (its debounce);
  -- a person takes longer than that to type the next prompt.
  vim.wait(250)
  local wait_done = submit("Mark the notes final")
  wait_for("the second permission request", 30000, function()
    return #from_pincer("session/request_permission") == 2
  end)
  expect(on_disk("notes.txt") == "# Notes\nstatus: draft\n", "notes.txt changed before the answer")
  allow_once()
  wait_done()
  expect(vim.deep_equal(permission_answers(), { "allow_once", "allow_once" }),
    "avante answered " .. vim.inspect(permission_answers()))
  expect(on_disk("notes.txt") == "# Notes\nstatus: final\n", "notes.txt holds " .. vim.inspect(on_disk("notes.txt")))
  expect(result_text():find(REPLY_3, 1, true), "the reply after the edit is not in the sidebar")
  -- Read again from the buffer avante opened, without its final newline.
  local reads = reads_of("notes.txt")
  expect(vim.deep_equal(reads, { { content = "# Notes\nstatus: draft\n" }, { content = "# Notes\nstatus: draft" } }),
    "reads of notes.txt: " .. vim.inspect(reads))
  for _, note in ipairs(from_pincer("session/update")) do
    expect(note.params.update.status ~= "failed", "a tool call failed: " .. vim.inspect(note.params.update))
  end
end)

test("both prompts went to one Pincer session, titled with the first prompt's words", function()
  local sent = {}
  for _, entry in ipairs(rpc) do
    if entry.from == "avante" and entry.args[1] == "session/prompt" then
      table.insert(sent, entry.args[2].sessionId)
    end
  end
  expect(vim.deep_equal(sent, { session_id, session_id }), "prompts went to " .. vim.inspect(sent))
  expect(sidebar.chat_history.acp_session_id == session_id, "avante's session changed")
  local listed = vim.system({ "pincer", "sessions", "list", "--json" }, { text = true }):wait()
  expect(listed.code == 0, "pincer sessions list failed: " .. listed.stderr)
  local ids = {}
  for line in listed.stdout:gmatch("[^\n]+") do
    table.insert(ids, vim.json.decode(line).session_id)
  end
  expect(vim.deep_equal(ids, { session_id }), "Pincer's sessions: " .. vim.inspect(ids) .. ", avante's " .. session_id)
  local shown = vim.system({ "pincer", "sessions", "show", session_id, "--json" }, { text = true }):wait()
  expect(shown.code == 0, "pincer sessions show failed: " .. shown.stderr)
  local session = vim.json.decode(shown.stdout)
  expect(session.session.title == "Say hello", "the session's title: " .. vim.inspect(session.session.title))
  local prompts = 0
  for _, entry in ipairs(session.history) do
    if entry.message.role == "user" then
      prompts = prompts + 1
    end
  end
  expect(prompts == 2, string.format("the session holds %d prompts", prompts))
  local titles = {}
  for _, note in ipairs(from_pincer("session/update")) do
    if note.params.update.sessionUpdate == "session_info_update" then
      table.insert(titles, note.params.update.title)
    end
  end
  expect(vim.deep_equal(titles, { "Say hello" }), "titles announced: " .. vim.inspect(titles))
end)

test("Pincer answered no request with an error, and Neovim showed none", function()
  local problems = {}
  for _, entry in ipairs(rpc) do
    if entry.from == "pincer" and entry.message.error ~= nil then
      table.insert(problems, "an error response: " .. vim.inspect(entry.message))
    end
  end
  -- avante's own error answers: only the read of the file not created yet.
  local errors = 0
  for _, entry in ipairs(rpc) do
    if entry.from == "avante" and entry.method == "_send_error" then
      errors = errors + 1
    end
  end
  if errors ~= 1 then
    table.insert(problems, string.format("avante answered %d requests with an error", errors))
  end
  for _, n in ipairs(notifications) do
    if n.level >= vim.log.levels.WARN then
      table.insert(problems, "a notification at level " .. n.level .. ": " .. n.msg)
    end
  end
  if vim.v.errmsg ~= "" then
    table.insert(problems, "v:errmsg is " .. vim.inspect(vim.v.errmsg))
  end
  local messages = vim.api.nvim_exec2("messages", { output = true }).output
  if messages:find("Error", 1, true) or messages:find("E%d+:") then
    table.insert(problems, "Neovim's messages:\n" .. messages)
  end
  expect(#problems == 0, table.concat(problems, "\n"))
end)

if sidebar and sidebar.acp_client then
  pcall(sidebar.acp_client.stop, sidebar.acp_client)
end
vim.fn.delete(tmp, "rf")
finish()
