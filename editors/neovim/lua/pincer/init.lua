-- Pincer for Neovim: builds the CodeCompanion.nvim adapter and the avante.nvim
-- `acp_providers` entry that launch `pincer acp`, from one set of options.
-- The plugin itself only needs Neovim 0.7 (it is tested on Debian's 0.7.2);
-- the ACP clients it feeds need more (see `:help pincer-requirements`).

local M = {}

local MODES = { read_only = true, supervised = true, full = true }

-- Variables avante.nvim would not pass on: it starts the agent with PATH and
-- the entry's `env` only, so without these Pincer finds no home directory,
-- config file or API key. Lua patterns, matched against whole names.
local DEFAULT_PASS_ENV = {
  "^HOME$",
  "^USER$",
  "^LOGNAME$",
  "^LANG$",
  "^LC_%u+$",
  "^TMPDIR$",
  "^XDG_%u+_HOME$",
  "^XDG_RUNTIME_DIR$",
  "^RUST_LOG$",
  "^SSL_CERT_FILE$",
  "^SSL_CERT_DIR$",
  "^HTTPS?_PROXY$",
  "^https?_proxy$",
  "^NO_PROXY$",
  "^no_proxy$",
  "^PINCER_",
  "_API_KEY$",
  "_BASE_URL$",
}

local DEFAULTS = {
  -- The executable: a name looked up on PATH, or an absolute path.
  cmd = "pincer",
  -- Arguments before the flags built from the options below.
  args = { "acp" },
  -- Extra environment for Pincer (PINCER_CONFIG, PINCER_DATA_DIR, API keys).
  env = {},
  -- Autonomy mode of new sessions: read_only, supervised or full (--mode).
  mode = nil,
  -- Model of new sessions (--model), e.g. "gpt-4.1-mini" or "openai/gpt-4.1-mini".
  model = nil,
  -- Provider of new sessions (--provider), a [providers.NAME] table or openai/anthropic.
  provider = nil,
  -- Config file (--config); default $XDG_CONFIG_HOME/pincer/config.toml.
  config = nil,
  -- Log file (--log-file); stdout carries the protocol, so logs go to stderr otherwise.
  log_file = nil,
  -- The adapter's and provider's name, and the name CodeCompanion shows.
  name = "pincer",
  formatted_name = "Pincer",
  -- Milliseconds CodeCompanion waits for the agent's answer to a request.
  timeout = 20000,
  -- MCP servers CodeCompanion passes in session/new (Pincer starts them per session).
  mcp_servers = {},
  -- Whether CodeCompanion may send images: true when your model takes them
  -- (Pincer refuses images for a model that does not, with -32602).
  images = false,
  -- The built-in CodeCompanion ACP adapter whose handlers Pincer's adapter reuses.
  codecompanion_base = "gemini_cli",
  -- Which of Neovim's environment variables the avante entry carries (patterns).
  pass_env = DEFAULT_PASS_ENV,
}

-- Every option setup() accepts (DEFAULTS leaves the optional ones nil).
local KNOWN = {
  cmd = true, args = true, env = true, mode = true, model = true, provider = true,
  config = true, log_file = true, name = true, formatted_name = true, timeout = true,
  mcp_servers = true, codecompanion_base = true, pass_env = true, images = true,
}

local options = nil

local function fail(message)
  error("pincer: " .. message, 0)
end

local function is_list_of_strings(value)
  if type(value) ~= "table" then
    return false
  end
  local count = 0
  for _ in pairs(value) do
    count = count + 1
  end
  for i = 1, count do
    if type(value[i]) ~= "string" then
      return false
    end
  end
  return true
end

local function check_optional_string(opts, key)
  local value = opts[key]
  if value ~= nil and (type(value) ~= "string" or value == "") then
    fail(string.format("option `%s` must be a non-empty string, got %s", key, vim.inspect(value)))
  end
end

local function validate(opts)
  for key in pairs(opts) do
    if not KNOWN[key] then
      fail(string.format("unknown option `%s`", tostring(key)))
    end
  end
  if type(opts.cmd) ~= "string" or opts.cmd == "" then
    fail(string.format("option `cmd` must be a non-empty string, got %s", vim.inspect(opts.cmd)))
  end
  if not is_list_of_strings(opts.args) then
    fail(string.format("option `args` must be a list of strings, got %s", vim.inspect(opts.args)))
  end
  if type(opts.env) ~= "table" then
    fail(string.format("option `env` must be a table of strings, got %s", vim.inspect(opts.env)))
  end
  for key, value in pairs(opts.env) do
    if type(key) ~= "string" or type(value) ~= "string" then
      fail(string.format("option `env`: %s = %s is not a string = string pair", vim.inspect(key), vim.inspect(value)))
    end
  end
  if opts.mode ~= nil and not MODES[opts.mode] then
    fail(string.format("option `mode` must be read_only, supervised or full, got %s", vim.inspect(opts.mode)))
  end
  for _, key in ipairs({ "model", "provider", "config", "log_file", "name", "formatted_name", "codecompanion_base" }) do
    check_optional_string(opts, key)
  end
  if type(opts.timeout) ~= "number" or opts.timeout <= 0 then
    fail(string.format("option `timeout` must be a positive number of milliseconds, got %s", vim.inspect(opts.timeout)))
  end
  if type(opts.images) ~= "boolean" then
    fail(string.format("option `images` must be true or false, got %s", vim.inspect(opts.images)))
  end
  if type(opts.mcp_servers) ~= "table" then
    fail(string.format("option `mcp_servers` must be a list, got %s", vim.inspect(opts.mcp_servers)))
  end
  if not is_list_of_strings(opts.pass_env) then
    fail(string.format("option `pass_env` must be a list of Lua patterns, got %s", vim.inspect(opts.pass_env)))
  end
end

---Set the options every helper uses. Unknown options and bad values are errors.
---@param opts? table
---@return table the module, for chaining
function M.setup(opts)
  if opts ~= nil and type(opts) ~= "table" then
    fail(string.format("setup() takes a table of options, got %s", vim.inspect(opts)))
  end
  local merged = vim.tbl_extend("force", vim.deepcopy(DEFAULTS), vim.deepcopy(opts or {}))
  validate(merged)
  options = merged
  return M
end

---The options in force: those given to setup(), or the defaults.
---@return table
function M.options()
  return options or vim.deepcopy(DEFAULTS)
end

---Whether setup() has been called.
---@return boolean
function M.is_setup()
  return options ~= nil
end

-- Only a leading ~/ is expanded: vim.fn.expand() would also expand %, # and <cfile>.
local function expand(path)
  if path:sub(1, 2) == "~/" and vim.env.HOME then
    return vim.env.HOME .. path:sub(2)
  end
  return path
end

---The default `pass_env` patterns, to extend rather than replace.
---@return string[]
function M.default_pass_env()
  return vim.deepcopy(DEFAULT_PASS_ENV)
end

---The argv that starts Pincer: cmd, args, then --mode/--model/--provider/--config/--log-file.
---@return string[]
function M.command()
  local o = M.options()
  local argv = { o.cmd }
  for _, arg in ipairs(o.args) do
    table.insert(argv, arg)
  end
  local function flag(name, value)
    if value ~= nil then
      table.insert(argv, name)
      table.insert(argv, value)
    end
  end
  flag("--mode", o.mode)
  flag("--model", o.model)
  flag("--provider", o.provider)
  flag("--config", o.config and expand(o.config))
  flag("--log-file", o.log_file and expand(o.log_file))
  return argv
end

---The environment Pincer needs on top of what it inherits (the `env` option).
---@return table<string, string>
function M.env()
  return vim.deepcopy(M.options().env)
end

---The spec of the CodeCompanion ACP adapter, before it is merged into the
---built-in adapter it extends. Fields follow CodeCompanion's ACP adapters
---(`lua/codecompanion/adapters/acp/*.lua`).
---@return table
function M.codecompanion_spec()
  local o = M.options()
  return {
    name = o.name,
    formatted_name = o.formatted_name,
    type = "acp",
    roles = { llm = "assistant", user = "user" },
    -- Pincer takes images only for models that do (else -32602): off unless
    -- the user says the model takes them.
    opts = { vision = o.images },
    commands = { default = M.command() },
    defaults = {
      mcpServers = vim.deepcopy(o.mcp_servers),
      timeout = o.timeout,
    },
    -- CodeCompanion launches with vim.system, which inherits Neovim's
    -- environment; these are added. A value naming a set variable is replaced
    -- by that variable's value, a "cmd:..." value by the command's output.
    env = M.env(),
    parameters = {
      protocolVersion = 1,
      clientCapabilities = {
        fs = { readTextFile = true, writeTextFile = true },
      },
      clientInfo = { name = "CodeCompanion.nvim", version = "1.0.0" },
    },
  }
end

---The CodeCompanion ACP adapter for Pincer. Put the function itself in
---`adapters.acp.pincer`; CodeCompanion calls it when the adapter is first used.
---It extends a built-in ACP adapter (`codecompanion_base`) so CodeCompanion's own
---handlers for its installed version are used, then replaces the command, the
---environment and the authentication with Pincer's (Pincer needs none).
---@return table
function M.codecompanion_adapter()
  local ok, adapters = pcall(require, "codecompanion.adapters")
  if not ok then
    fail("codecompanion.nvim is not installed: require(\"codecompanion.adapters\") failed")
  end
  local o = M.options()
  local spec = M.codecompanion_spec()
  local adapter = adapters.extend(o.codecompanion_base, spec)
  if type(adapter) ~= "table" then
    fail(string.format(
      "CodeCompanion has no built-in ACP adapter `%s` to extend; set the option `codecompanion_base` to one it has (for example `goose`)",
      o.codecompanion_base
    ))
  end
  -- tbl_deep_extend merges: the base's other commands (gemini's `yolo`), its
  -- API key variable and its auth method would survive; Pincer's replace them.
  adapter.commands = spec.commands
  adapter.env = spec.env
  adapter.opts = spec.opts
  adapter.defaults = adapter.defaults or {}
  adapter.defaults.auth_method = nil
  return adapter
end

local function passes(name, patterns)
  for _, pattern in ipairs(patterns) do
    if name:match(pattern) then
      return true
    end
  end
  return false
end

---The avante.nvim `acp_providers` entry for Pincer: `{ command, args, env }`.
---avante starts the agent with PATH and this `env` only, so the entry carries
---the variables of Neovim's environment that match `pass_env`, then `env`.
---@return { command: string, args: string[], env: table<string, string> }
function M.avante_provider()
  local o = M.options()
  local argv = M.command()
  local env = {}
  for name, value in pairs(vim.fn.environ()) do
    if passes(name, o.pass_env) then
      env[name] = value
    end
  end
  for name, value in pairs(o.env) do
    env[name] = value
  end
  return {
    command = argv[1],
    args = vim.list_slice(argv, 2),
    env = env,
  }
end

return M
