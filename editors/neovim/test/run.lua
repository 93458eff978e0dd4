-- Headless test of the Neovim plugin against the built binary:
--   PINCER_BIN=target/debug/pincer nvim --headless -u NONE -i NONE -c "luafile editors/neovim/test/run.lua"
-- It checks setup() and the launch command, registers Pincer with a stand-in
-- for avante.nvim, launches exactly what avante would launch, completes a
-- prompt over ACP, and runs :checkhealth pincer. Exit code 0 when everything
-- passed. CodeCompanion.nvim and avante.nvim are tested for real, under
-- Neovim 0.11: test/codecompanion.lua and test/avante.lua.

local here = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h")
local plugin_root = vim.fn.fnamemodify(here, ":h")
vim.opt.runtimepath:prepend(plugin_root)
package.path = here .. "/?.lua;" .. package.path

local Client = require("acp_client")
local fakes = require("fakes")

local passed, failed = 0, 0

local function out(text)
  io.stdout:write(text .. "\n")
  io.stdout:flush()
end

local function test(name, fn)
  local ok, err = pcall(fn)
  if ok then
    passed = passed + 1
    out("ok   " .. name)
  else
    failed = failed + 1
    out("FAIL " .. name .. "\n     " .. tostring(err):gsub("\n", "\n     "))
  end
end

local function expect(condition, message)
  if not condition then
    error(message, 2)
  end
end

local function finish()
  out(string.format("%d passed, %d failed", passed, failed))
  os.exit(failed == 0 and 0 or 1)
end

local bin = os.getenv("PINCER_BIN")
if bin == nil or bin == "" then
  out("FAIL PINCER_BIN is not set: point it at the built pincer binary")
  os.exit(1)
end
bin = vim.fn.fnamemodify(bin, ":p")
if vim.fn.executable(bin) ~= 1 then
  out("FAIL PINCER_BIN=" .. bin .. " is not an executable file: build it first (cargo build)")
  os.exit(1)
end

-- An isolated world: a model script whose first turn answers a fixed text, a
-- config file choosing the scripted provider, fresh data directories.
local tmp = vim.fn.tempname()
vim.fn.mkdir(tmp, "p")
local function write(path, lines)
  vim.fn.mkdir(vim.fn.fnamemodify(path, ":h"), "p")
  vim.fn.writefile(lines, path)
end
local REPLY = "Hello from Pincer"
write(tmp .. "/script.jsonl", { vim.fn.json_encode({ { text = REPLY } }) })
local config_lines = {
  'provider = "demo"',
  "[providers.demo]",
  'kind = "scripted"',
  'script = "' .. tmp .. '/script.jsonl"',
  'models = ["script", "other"]',
}
local config_file = tmp .. "/config.toml"
write(config_file, config_lines)
-- The same config where an XDG-following Pincer looks for it (avante case).
local xdg_config = tmp .. "/xdg-config"
local xdg_data = tmp .. "/xdg-data"
write(xdg_config .. "/pincer/config.toml", config_lines)
vim.fn.mkdir(xdg_data, "p")
local workspace = tmp .. "/workspace"
vim.fn.mkdir(workspace, "p")

-- Nothing from the caller's environment may point Pincer elsewhere.
for _, name in ipairs({ "PINCER_CONFIG", "PINCER_DATA_DIR", "PINCER_PROVIDER", "PINCER_MODEL", "PINCER_MODE" }) do
  vim.env[name] = nil
end
-- A home of its own, so a mistake can never write into the real one.
vim.env.HOME = tmp .. "/home"
vim.fn.mkdir(tmp .. "/home", "p")
vim.env.XDG_CONFIG_HOME = xdg_config
vim.env.XDG_DATA_HOME = xdg_data
vim.env.PINCER_TEST_UNRELATED = "must not reach avante's agent"

fakes.install()

local function find_config_option(result, id)
  for _, option in ipairs(result.configOptions or {}) do
    if option.id == id then
      return option.currentValue
    end
  end
  return nil
end

-- initialize → session/new → session/prompt against what `spec` launches.
local function complete_a_prompt(spec, expected)
  local client = Client.start(spec.argv, { env = spec.env, clear_env = spec.clear_env, cwd = workspace })
  local ok, err = pcall(function()
    local init = client:request("initialize", spec.initialize, spec.timeout)
    expect(init.protocolVersion == 1, "initialize: protocolVersion " .. vim.inspect(init.protocolVersion))
    local session = client:request("session/new", { cwd = workspace, mcpServers = spec.mcp_servers }, spec.timeout)
    expect(type(session.sessionId) == "string", "session/new: no sessionId")
    if expected.mode then
      expect(session.modes and session.modes.currentModeId == expected.mode,
        string.format("session/new: mode %s, expected %s", vim.inspect(session.modes), expected.mode))
      expect(find_config_option(session, "mode") == expected.mode, "session/new: mode config option differs")
    end
    if expected.model then
      local model = find_config_option(session, "model")
      expect(model == expected.model, string.format("session/new: model %s, expected %s", vim.inspect(model), expected.model))
    end
    local before = #client.notifications
    local result = client:request("session/prompt", {
      sessionId = session.sessionId,
      prompt = { { type = "text", text = "Say hello" } },
    }, 30000)
    local text = ""
    for i = before + 1, #client.notifications do
      local params = client.notifications[i]
      expect(params.sessionId == session.sessionId, "session/update for another session")
      local update = params.update
      if update.sessionUpdate == "agent_message_chunk" and update.content.type == "text" then
        text = text .. update.content.text
      end
    end
    expect(text == REPLY, string.format("streamed agent_message_chunk text %q, expected %q", text, REPLY))
    expect(result.stopReason == "end_turn", "stopReason " .. vim.inspect(result.stopReason))
  end)
  local code = client:stop()
  if not ok then
    error(tostring(err) .. "\n" .. client:describe_failure(), 0)
  end
  expect(code == 0, "the agent exited with " .. tostring(code) .. " after stdin closed\n" .. client:describe_failure())
end

local pincer = require("pincer")

test("setup rejects an unknown mode, naming it", function()
  local ok, err = pcall(pincer.setup, { mode = "yolo" })
  expect(not ok, "setup accepted mode yolo")
  expect(tostring(err):find("yolo", 1, true) and tostring(err):find("read_only", 1, true),
    "the error does not name the mode and the choices: " .. tostring(err))
end)

test("setup rejects an unknown option and a non-string env value", function()
  local ok, err = pcall(pincer.setup, { comand = "pincer" })
  expect(not ok and tostring(err):find("comand", 1, true), "unknown option not reported: " .. tostring(err))
  ok, err = pcall(pincer.setup, { env = { PINCER_MODE = true } })
  expect(not ok and tostring(err):find("PINCER_MODE", 1, true), "bad env value not reported: " .. tostring(err))
  ok, err = pcall(pincer.setup, { images = "yes" })
  expect(not ok and tostring(err):find("images", 1, true), "bad images value not reported: " .. tostring(err))
  pincer.setup({ images = true })
  expect(pincer.codecompanion_spec().opts.vision == true, "images = true does not turn vision on")
end)

test("mode, model, provider, config and log file become flags after cmd and args", function()
  pincer.setup({ cmd = "/opt/pincer", mode = "full", model = "gpt-4.1-mini", provider = "openai",
    config = "~/pincer.toml", log_file = "/tmp/100%.log" })
  local argv = pincer.command()
  local want = { "/opt/pincer", "acp", "--mode", "full", "--model", "gpt-4.1-mini", "--provider", "openai",
    "--config", vim.env.HOME .. "/pincer.toml", "--log-file", "/tmp/100%.log" }
  expect(vim.deep_equal(argv, want), "command() = " .. vim.inspect(argv))
end)

test("avante: the acp_providers entry launches Pincer with avante's bare environment and completes a prompt", function()
  -- No PINCER_CONFIG/PINCER_DATA_DIR here: Pincer must find its XDG config
  -- and data directories through the variables the entry passes on.
  pincer.setup({ cmd = bin, mode = "supervised" })
  local entry = pincer.avante_provider()
  expect(entry.env.XDG_CONFIG_HOME == xdg_config and entry.env.XDG_DATA_HOME == xdg_data,
    "the entry does not carry the XDG directories: " .. vim.inspect(entry.env))
  expect(entry.env.PINCER_TEST_UNRELATED ~= nil, "PINCER_* variables are meant to pass")
  vim.env.PINCER_TEST_UNRELATED = nil
  entry = pincer.avante_provider()
  expect(entry.env.PINCER_TEST_UNRELATED == nil, "avante_provider() must read the environment when called")
  vim.env.UNRELATED_TEST_VARIABLE = "x"
  entry = pincer.avante_provider()
  expect(entry.env.UNRELATED_TEST_VARIABLE == nil, "a variable matching no pass_env pattern was passed")
  require("avante").setup({ provider = "pincer", acp_providers = { pincer = entry } })
  local spec = fakes.avante.launch_spec()
  expect(spec.argv[1] == bin, "avante launches " .. vim.inspect(spec.argv[1]))
  complete_a_prompt(spec, { mode = "supervised", model = "demo/script" })
  expect(vim.fn.filereadable(xdg_data .. "/pincer/pincer.db") == 1, "Pincer did not use XDG_DATA_HOME")
end)

test("avante: without the passed-on variables Pincer cannot start (the bare environment is real)", function()
  pincer.setup({ cmd = bin, pass_env = {} })
  require("avante").setup({ provider = "pincer", acp_providers = { pincer = pincer.avante_provider() } })
  local spec = fakes.avante.launch_spec()
  local ok, err = pcall(complete_a_prompt, spec, {})
  expect(not ok, "Pincer completed a prompt with PATH alone")
  expect(tostring(err):find("home directory", 1, true), "unexpected failure: " .. tostring(err))
end)

local function checkhealth_lines()
  vim.cmd("silent checkhealth pincer")
  local lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  vim.cmd("bwipeout!")
  return table.concat(lines, "\n")
end

test(":checkhealth pincer reports OK for the built binary", function()
  -- `config` goes to `pincer doctor` as --config, `env` as its environment.
  pincer.setup({ cmd = bin, config = config_file, env = { PINCER_DATA_DIR = tmp .. "/data-health" } })
  local report = checkhealth_lines()
  expect(report:find("config: " .. config_file, 1, true), "doctor did not use the config option:\n" .. report)
  expect(report:find("data dir: " .. tmp .. "/data-health", 1, true), "doctor did not get env:\n" .. report)
  expect(report:find("found `" .. bin .. "`", 1, true), "binary not reported found:\n" .. report)
  expect(report:find("--version` runs: pincer", 1, true), "--version not reported:\n" .. report)
  expect(report:find("acp` is available", 1, true), "acp not reported:\n" .. report)
  expect(report:find("provider demo scripted", 1, true), "doctor's provider line missing:\n" .. report)
  expect(not report:find("ERROR", 1, true), "checkhealth reported an error:\n" .. report)
  local oks = select(2, report:gsub("OK", ""))
  expect(oks >= 6, "expected at least 6 OK lines, got " .. oks .. ":\n" .. report)
end)

test(":checkhealth pincer reports an ERROR for a missing binary", function()
  pincer.setup({ cmd = tmp .. "/no-such-pincer" })
  local report = checkhealth_lines()
  expect(report:find("ERROR", 1, true) and report:find("no-such-pincer", 1, true),
    "a missing binary was not an error:\n" .. report)
end)

test("the help file has its tags and :helptags accepts it", function()
  local doc = tmp .. "/doc"
  vim.fn.mkdir(doc, "p")
  vim.fn.writefile(vim.fn.readfile(plugin_root .. "/doc/pincer.txt"), doc .. "/pincer.txt")
  vim.cmd("helptags " .. vim.fn.fnameescape(doc))
  local tags = table.concat(vim.fn.readfile(doc .. "/tags"), "\n")
  for _, tag in ipairs({ "pincer.txt", "pincer-setup", "pincer-options", "pincer-health", "pincer.setup()",
    "pincer.codecompanion_adapter()", "pincer.avante_provider()" }) do
    expect(tags:find(tag .. "\t", 1, true), "missing help tag " .. tag)
  end
end)

vim.fn.delete(tmp, "rf")
finish()
