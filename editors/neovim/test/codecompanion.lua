-- Headless test of Pincer in the real CodeCompanion.nvim (Neovim 0.11):
--   PINCER_BIN=target/debug/pincer CODECOMPANION_DIR=... PLENARY_DIR=... \
--     nvim --headless -u NONE -i NONE -c "luafile editors/neovim/test/codecompanion.lua"
-- It loads editors/neovim/examples/codecompanion.lua (the configuration
-- docs/editors.md quotes) with `pincer` on PATH and a scripted model, opens a
-- chat through CodeCompanion's own API, and talks to Pincer as a user would:
-- a reply streams into the chat buffer; a file edit asks for permission in the
-- chat, is accepted with CodeCompanion's keymap, and lands on disk; a
-- follow-up continues the same Pincer session; /resume loads it into a new
-- chat; CodeCompanion logs no error, and no JSON-RPC message is an error.
-- Exit code 0 when everything passed; the last line is "N passed, M failed".

local here = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h")
local plugin_root = vim.fn.fnamemodify(here, ":h")
local repo_root = vim.fn.fnamemodify(plugin_root, ":h:h")
local snippet = plugin_root .. "/examples/codecompanion.lua"

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
  abort("CodeCompanion.nvim needs Neovim 0.11 or later; this is " .. tostring(vim.version()))
end

local function required_dir(var, file)
  local dir = os.getenv(var)
  if dir == nil or dir == "" then
    abort(var .. " is not set: point it at a checkout of the plugin")
  end
  dir = vim.fn.fnamemodify(dir, ":p"):gsub("/$", "")
  if vim.fn.filereadable(dir .. "/" .. file) ~= 1 then
    abort(var .. "=" .. dir .. " has no " .. file)
  end
  return dir
end

local bin = os.getenv("PINCER_BIN")
if bin == nil or bin == "" then
  abort("PINCER_BIN is not set: point it at the built pincer binary")
end
bin = vim.fn.fnamemodify(bin, ":p")
if vim.fn.executable(bin) ~= 1 then
  abort("PINCER_BIN=" .. bin .. " is not an executable file: build it first (cargo build)")
end
local codecompanion_dir = required_dir("CODECOMPANION_DIR", "lua/codecompanion/init.lua")
local plenary_dir = required_dir("PLENARY_DIR", "lua/plenary/async/init.lua")

-- An isolated world: its own home, XDG directories (Pincer's config and data,
-- Neovim's log directory, where CodeCompanion writes its log), `pincer` on
-- PATH, and a workspace holding one file to edit.
local tmp = vim.fn.tempname()
vim.fn.mkdir(tmp, "p")
local function write(path, lines)
  vim.fn.mkdir(vim.fn.fnamemodify(path, ":h"), "p")
  vim.fn.writefile(lines, path)
end
for _, name in ipairs({ "PINCER_CONFIG", "PINCER_DATA_DIR", "PINCER_PROVIDER", "PINCER_MODEL", "PINCER_MODE" }) do
  vim.env[name] = nil
end
vim.env.HOME = tmp .. "/home"
vim.env.XDG_CONFIG_HOME = tmp .. "/config"
vim.env.XDG_DATA_HOME = tmp .. "/data"
vim.env.XDG_STATE_HOME = tmp .. "/state"
vim.env.XDG_CACHE_HOME = tmp .. "/cache"
-- Neovim makes its log directory at startup; this one is new.
for _, dir in ipairs({ vim.env.HOME, vim.env.XDG_DATA_HOME, vim.fn.stdpath("log"), vim.env.XDG_CACHE_HOME }) do
  vim.fn.mkdir(dir, "p")
end
vim.fn.mkdir(tmp .. "/bin", "p")
vim.uv.fs_symlink(bin, tmp .. "/bin/pincer")
vim.env.PATH = tmp .. "/bin:" .. vim.env.PATH

-- The model's turns, one line each (docs/scripted-provider.md): the first
-- prompt's reply; the second prompt's edit of notes.txt and the reply after
-- it; the third prompt's reply; the reply after /resume. Lines are counted
-- per session, so a new session would start again at line 1.
local REPLY_1 = "Hello from Pincer, first turn"
local REPLY_2 = "I changed notes.txt"
local REPLY_3 = "Still the same session, third answer"
local REPLY_4 = "Resumed: the fourth answer"
write(tmp .. "/script.jsonl", {
  vim.json.encode({ { text = "Hello from " }, { text = "Pincer, first turn" } }),
  vim.json.encode({
    { text = "Editing the notes." },
    { tool_call = { name = "edit_file", arguments = {
      path = "notes.txt",
      edits = { { old_text = "status: draft", new_text = "status: final" } },
    } } },
  }),
  vim.json.encode({ { text = REPLY_2 } }),
  vim.json.encode({ { text = REPLY_3 } }),
  vim.json.encode({ { text = REPLY_4 } }),
})
write(vim.env.XDG_CONFIG_HOME .. "/pincer/config.toml", {
  'provider = "demo"',
  "[providers.demo]",
  'kind = "scripted"',
  'script = "' .. tmp .. '/script.jsonl"',
  'models = ["script", "other"]',
})
local workspace = tmp .. "/workspace"
write(workspace .. "/notes.txt", { "# Notes", "status: draft" })
vim.cmd.cd(vim.fn.fnameescape(workspace))

vim.opt.runtimepath:prepend(plenary_dir)
vim.opt.runtimepath:prepend(codecompanion_dir)
vim.opt.runtimepath:prepend(plugin_root)

-- Every message shown to the user, to fail on errors.
local notifications = {}
vim.notify = function(msg, level, opts)
  table.insert(notifications, { msg = tostring(msg), level = level or vim.log.levels.INFO })
end

-- CodeCompanion events (User CodeCompanion*), in order.
local events = {}
vim.api.nvim_create_autocmd("User", {
  pattern = "CodeCompanion*",
  callback = function(args)
    table.insert(events, { name = args.match, data = args.data })
  end,
})
local function count_events(name)
  local n = 0
  for _, event in ipairs(events) do
    if event.name == name then
      n = n + 1
    end
  end
  return n
end

local function wait_for(what, timeout_ms, condition)
  local ok = vim.wait(timeout_ms, condition, 20)
  expect(ok, string.format("timed out after %d ms waiting for %s", timeout_ms, what))
end

-- The snippet, as a user's init.lua runs it; the test only raises
-- CodeCompanion's log level so its log shows what happened.
local codecompanion = require("codecompanion")
local real_setup = codecompanion.setup
codecompanion.setup = function(opts)
  opts = vim.tbl_deep_extend("force", opts or {}, { opts = { log_level = "DEBUG" } })
  return real_setup(opts)
end
local loaded, load_err = pcall(dofile, snippet)
codecompanion.setup = real_setup
if not loaded then
  abort("loading " .. snippet .. ": " .. tostring(load_err))
end

local logfile = require("codecompanion.utils.log").get_logfile()
local function read_file(path)
  if vim.fn.filereadable(path) ~= 1 then
    return ""
  end
  return table.concat(vim.fn.readfile(path), "\n")
end

local chat
local opened = {}

diagnostics = function()
  local parts = {}
  if chat and vim.api.nvim_buf_is_valid(chat.bufnr) then
    table.insert(parts, "--- chat buffer\n" .. table.concat(vim.api.nvim_buf_get_lines(chat.bufnr, 0, -1, false), "\n"))
  end
  table.insert(parts, "--- " .. logfile .. "\n" .. read_file(logfile))
  return "\n" .. table.concat(parts, "\n")
end

local function buffer_text()
  return table.concat(vim.api.nvim_buf_get_lines(chat.bufnr, 0, -1, false), "\n")
end

local function last_event(name)
  for i = #events, 1, -1 do
    if events[i].name == name then
      return events[i]
    end
  end
  return nil
end

-- Type `text` at the end of the chat buffer and submit it, as <CR> in the
-- chat buffer does. Returns a function that waits for the turn to end.
local function submit(text)
  local done_before = count_events("CodeCompanionChatDone")
  local last = vim.api.nvim_buf_line_count(chat.bufnr)
  vim.api.nvim_buf_set_lines(chat.bufnr, last, last, false, { text })
  chat:submit()
  return function()
    wait_for("the reply to " .. vim.inspect(text), 30000, function()
      return count_events("CodeCompanionChatDone") > done_before
    end)
    -- The request's outcome (the chat resets its own status when the turn ends).
    local finished = last_event("CodeCompanionRequestFinished")
    expect(finished and finished.data.status == "success",
      "the request ended " .. vim.inspect(finished and finished.data))
  end
end

local function notes()
  return vim.fn.readfile(workspace .. "/notes.txt")
end

test("docs/editors.md quotes the configuration this test loads, as it is", function()
  local doc = read_file(repo_root .. "/docs/editors.md")
  local quoted = "```lua\n" .. read_file(snippet) .. "\n```\n"
  expect(doc ~= "", "docs/editors.md is missing")
  expect(doc:find(quoted, 1, true), "docs/editors.md does not quote " .. snippet .. " in a ```lua block")
end)

test("the snippet registers Pincer's adapter and CodeCompanion resolves it", function()
  local adapter = require("codecompanion.adapters").resolve("pincer")
  expect(adapter and adapter.type == "acp", "resolved adapter " .. vim.inspect(adapter))
  expect(adapter.name == "pincer" and adapter.formatted_name == "Pincer", "adapter name " .. vim.inspect(adapter.name))
  expect(vim.deep_equal(adapter.commands.selected, { "pincer", "acp", "--mode", "supervised" }),
    "CodeCompanion launches " .. vim.inspect(adapter.commands.selected))
  expect(adapter.commands.yolo == nil, "the base adapter's other commands survived: " .. vim.inspect(adapter.commands))
  expect(adapter.env.GEMINI_API_KEY == nil, "the base adapter's env survived: " .. vim.inspect(adapter.env))
  expect(adapter.defaults.auth_method == nil, "an auth method survived: " .. vim.inspect(adapter.defaults.auth_method))
  expect(adapter.opts.vision == false, "vision must be off unless `images` is set")
end)

test("a chat connects to Pincer and streams its reply into the chat buffer", function()
  vim.cmd("CodeCompanionChat")
  chat = codecompanion.last_chat()
  expect(chat ~= nil, ":CodeCompanionChat opened no chat")
  table.insert(opened, chat)
  wait_for("the ACP session", 20000, function()
    return chat.acp_connection ~= nil and chat.acp_connection.session_id ~= nil
  end)
  expect(chat.acp_connection.session_id:match("^ses_"), "not a Pincer session: " .. chat.acp_connection.session_id)
  submit("Say hello")()
  expect(buffer_text():find("## CodeCompanion (Pincer)\n\n" .. REPLY_1, 1, true),
    "the reply is not in the chat buffer under Pincer's header")
end)

test("an edit asks for permission in the chat; CodeCompanion's accept key lets Pincer write the file", function()
  local wait_done = submit("Mark the notes final")
  wait_for("the permission request", 30000, function()
    return count_events("CodeCompanionToolApprovalRequested") > 0
  end)
  -- What the user sees before answering: the diff, and nothing written yet.
  local text = buffer_text()
  expect(text:find("Proposed edits for `notes.txt`", 1, true), "the approval prompt does not name the file")
  expect(text:find("-status: draft\n+status: final", 1, true), "the approval prompt shows no diff")
  expect(vim.deep_equal(notes(), { "# Notes", "status: draft" }), "notes.txt changed before the answer")
  -- The key the prompt offers for "Accept", pressed in the chat window.
  -- Pincer's options as CodeCompanion offers them (reject_always has no key).
  local labels = require("codecompanion.interactions.chat.tools.labels")
  local keys = labels.keymaps()
  for _, choice in ipairs({ { keys.accept, labels.accept }, { keys.always_accept, labels.always_accept },
    { keys.reject, labels.reject }, { keys.cancel, labels.cancel } }) do
    local line = string.format("- `%s` - %s\n", choice[1], choice[2])
    expect(text:find(line, 1, true), "the prompt does not offer " .. line)
  end
  vim.api.nvim_set_current_win(chat.ui.winnr)
  vim.api.nvim_feedkeys(vim.keycode(keys.accept), "mx", false)
  wait_done()
  local finished = last_event("CodeCompanionToolApprovalFinished")
  expect(finished and finished.data.choice == "Accept", "the approval ended " .. vim.inspect(finished and finished.data))
  expect(buffer_text():find(REPLY_2, 1, true), "the reply after the edit is not in the chat buffer")
  expect(vim.deep_equal(notes(), { "# Notes", "status: final" }), "notes.txt is " .. vim.inspect(notes()))
  -- Pincer wrote through the editor (fs/write_text_file), as it does when the
  -- client offers it.
  local edited = last_event("CodeCompanionFileEdited")
  expect(edited and edited.data.path == workspace .. "/notes.txt", "no FileEdited event for notes.txt")
end)

test("a follow-up in the chat continues the same Pincer session", function()
  local session_id = chat.acp_connection.session_id
  submit("And now?")()
  -- A new session would have played the script's first line again.
  expect(buffer_text():find(REPLY_3, 1, true), "the third reply is not in the chat buffer")
  expect(chat.acp_connection.session_id == session_id, "the chat's session changed")
  local listed = vim.system({ "pincer", "sessions", "list", "--json" }, { text = true }):wait()
  expect(listed.code == 0, "pincer sessions list failed: " .. listed.stderr)
  local ids = {}
  for line in listed.stdout:gmatch("[^\n]+") do
    table.insert(ids, vim.json.decode(line).session_id)
  end
  expect(vim.deep_equal(ids, { session_id }), "Pincer's sessions: " .. vim.inspect(ids) .. ", the chat's " .. session_id)
  local shown = vim.system({ "pincer", "sessions", "show", session_id, "--json" }, { text = true }):wait()
  expect(shown.code == 0, "pincer sessions show failed: " .. shown.stderr)
  local prompts = {}
  for _, entry in ipairs(vim.json.decode(shown.stdout).history) do
    if entry.message.role == "user" then
      local text = ""
      for _, part in ipairs(entry.message.content) do
        text = text .. (part.text or "")
      end
      table.insert(prompts, text)
    end
  end
  expect(vim.deep_equal(prompts, { "Say hello", "Mark the notes final", "And now?" }),
    "the session's prompts: " .. vim.inspect(prompts))
end)

test("/resume in a new chat loads the session (session/load) with its history; a prompt continues it", function()
  local first = chat
  local session_id = first.acp_connection.session_id
  chat = codecompanion.chat()
  expect(chat ~= nil and chat ~= first, "codecompanion.chat() opened no new chat")
  table.insert(opened, chat)
  wait_for("the new chat's ACP session", 20000, function()
    return chat.acp_connection ~= nil and chat.acp_connection.session_id ~= nil
  end)
  expect(chat.acp_connection.session_id ~= session_id, "the new chat reused the session")
  -- The user picks the earlier session by what the picker shows: its title,
  -- else its id (vim.ui.select is the UI CodeCompanion asks through).
  local listed = vim.system({ "pincer", "sessions", "show", session_id, "--json" }, { text = true }):wait()
  expect(listed.code == 0, "pincer sessions show failed: " .. listed.stderr)
  local title = vim.json.decode(listed.stdout).session.title
  local wanted = (type(title) == "string" and title ~= "") and title or session_id
  local offered
  local real_select = vim.ui.select
  vim.ui.select = function(items, _, on_choice)
    offered = items
    for i, item in ipairs(items) do
      if vim.endswith(item, wanted) then
        return on_choice(item, i)
      end
    end
    return on_choice(nil, nil)
  end
  local ok, err = pcall(function()
    local slash_commands = require("codecompanion.interactions.chat.slash_commands")
    local item = { label = "resume", config = require("codecompanion.config").interactions.chat.slash_commands.resume }
    slash_commands.new():execute(item, chat)
  end)
  vim.ui.select = real_select
  expect(ok, tostring(err))
  expect(offered ~= nil, "no session picker was shown")
  wait_for("the restored chat", 20000, function()
    return count_events("CodeCompanionACPChatRestored") > 0
  end)
  expect(chat.acp_connection.session_id == session_id,
    "the chat is on " .. chat.acp_connection.session_id .. " after picking " .. wanted .. " from " .. vim.inspect(offered))
  local text = buffer_text()
  for _, said in ipairs({ "Say hello", REPLY_1, "Mark the notes final", REPLY_2, "And now?", REPLY_3 }) do
    expect(text:find(said, 1, true), "the restored chat does not show " .. vim.inspect(said))
  end
  submit("Go on")()
  expect(buffer_text():find(REPLY_4, 1, true), "the reply after resuming is not the session's next turn")
end)

test("setup()'s model and env reach Pincer through CodeCompanion (env resolved from `cmd:`)", function()
  -- A second chat after setup() changed: the adapter function reads the
  -- options when CodeCompanion calls it.
  local data_dir = tmp .. "/data-from-cmd"
  require("pincer").setup({
    mode = "supervised",
    model = "other",
    env = { PINCER_DATA_DIR = "cmd:printf %s " .. data_dir },
  })
  local first = chat
  chat = codecompanion.chat()
  expect(chat ~= nil and chat ~= first, "codecompanion.chat() opened no new chat")
  table.insert(opened, chat)
  wait_for("the second chat's ACP session", 20000, function()
    return chat.acp_connection ~= nil and chat.acp_connection.session_id ~= nil
  end)
  local models = chat.acp_connection:get_models()
  expect(models and models.currentModelId == "demo/other", "the session's model: " .. vim.inspect(models))
  submit("Say hello again")()
  expect(buffer_text():find(REPLY_1, 1, true), "a new session's first reply is not in the chat buffer")
  expect(vim.fn.filereadable(data_dir .. "/pincer.db") == 1, "Pincer did not use PINCER_DATA_DIR from `cmd:`")
end)

test("CodeCompanion logged no error and Neovim showed none", function()
  -- The log is written asynchronously, in order: once a line logged now is
  -- in the file, everything before it is.
  local marker = "codecompanion.lua: end of the test " .. tmp
  require("codecompanion.utils.log"):debug(marker)
  wait_for("the log", 5000, function()
    return read_file(logfile):find(marker, 1, true) ~= nil
  end)
  expect(read_file(logfile):find("Session established: " .. chat.acp_connection.session_id, 1, true),
    "the log does not show the last chat's session")
  local problems = {}
  local log = read_file(logfile)
  for line in log:gmatch("[^\n]+") do
    if line:find("[ERROR]", 1, true) then
      table.insert(problems, "the log has an ERROR line: " .. line)
    end
  end
  -- Every JSON-RPC message either side sent (CodeCompanion keeps a log of
  -- each connection's traffic): no error response, in either direction.
  local rpc_logs = 0
  for path in log:gmatch("%[acp%] RPC log: (%S+)") do
    rpc_logs = rpc_logs + 1
    for line in read_file(path):gmatch("[^\n]+") do
      if line:sub(1, 1) == "{" then
        local decoded, message = pcall(vim.json.decode, line)
        if not decoded then
          table.insert(problems, path .. ": not JSON: " .. line)
        elseif type(message) == "table" and message.error ~= nil then
          table.insert(problems, path .. ": an error response: " .. line)
        end
      end
    end
  end
  if rpc_logs ~= #opened then
    table.insert(problems, string.format("%d RPC logs for %d chats", rpc_logs, #opened))
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

for _, c in ipairs(opened) do
  pcall(c.close, c)
end
vim.fn.delete(tmp, "rf")
finish()
