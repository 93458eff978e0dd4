-- Stand-ins for CodeCompanion.nvim and avante.nvim, which the tests cannot
-- install (they live on GitHub). Each records what it is given and rejects
-- shapes the real plugin documents as wrong; each resolves and launches an
-- agent the way the real plugin does:
--   CodeCompanion: lua/codecompanion/adapters/acp/init.lua (extend, resolve)
--   and lua/codecompanion/acp/init.lua (Connection:_setup_adapter, vim.system
--   with the adapter's env on top of Neovim's environment);
--   avante: lua/avante/libs/acp_client.lua (uv.spawn with PATH plus the
--   provider's env only).

local F = { recorded = {} }

local function check(condition, message)
  if not condition then
    error("fake plugin: " .. message, 0)
  end
end

local function is_list_of_strings(value, nonempty)
  if type(value) ~= "table" then
    return false
  end
  if nonempty and #value == 0 then
    return false
  end
  local count = 0
  for _ in pairs(value) do
    count = count + 1
  end
  if count ~= #value then
    return false
  end
  for _, item in ipairs(value) do
    if type(item) ~= "string" then
      return false
    end
  end
  return true
end

-- The built-in gemini_cli ACP adapter as CodeCompanion ships it
-- (lua/codecompanion/adapters/acp/gemini_cli.lua).
local function gemini_cli()
  return {
    name = "gemini_cli",
    formatted_name = "Gemini CLI",
    type = "acp",
    roles = { llm = "assistant", user = "user" },
    opts = { vision = true },
    commands = {
      default = { "gemini", "--experimental-acp" },
      yolo = { "gemini", "--yolo", "--experimental-acp" },
    },
    defaults = { auth_method = "gemini-api-key", mcpServers = {}, timeout = 20000 },
    env = { GEMINI_API_KEY = "GEMINI_API_KEY" },
    parameters = {
      protocolVersion = 1,
      clientCapabilities = { fs = { readTextFile = true, writeTextFile = true } },
      clientInfo = { name = "CodeCompanion.nvim", version = "1.0.0" },
    },
    handlers = {
      setup = function()
        return true
      end,
      form_messages = function(self, messages)
        local out = {}
        for _, msg in ipairs(messages) do
          if msg.role == self.roles.user and msg.content and msg.content ~= "" then
            table.insert(out, { type = "text", text = msg.content })
          end
        end
        return out
      end,
      on_exit = function() end,
    },
  }
end

local BUILTIN_ACP = { gemini_cli = gemini_cli }

-- What a CodeCompanion ACP adapter must look like (CodeCompanion.ACPAdapter).
function F.check_codecompanion_adapter(adapter)
  check(type(adapter) == "table", "the adapter is not a table: " .. vim.inspect(adapter))
  check(adapter.type == "acp", "adapter.type must be \"acp\", got " .. vim.inspect(adapter.type))
  check(type(adapter.name) == "string" and adapter.name ~= "", "adapter.name must be a string")
  check(type(adapter.formatted_name) == "string", "adapter.formatted_name must be a string")
  check(type(adapter.roles) == "table" and adapter.roles.user == "user" and adapter.roles.llm == "assistant",
    "adapter.roles must map llm/user")
  check(type(adapter.commands) == "table", "adapter.commands must be a table with a `default` command")
  for name, command in pairs(adapter.commands) do
    check(is_list_of_strings(command, true), string.format("adapter.commands.%s must be a non-empty list of strings, got %s",
      name, vim.inspect(command)))
  end
  check(adapter.commands.default ~= nil, "adapter.commands.default is missing")
  check(type(adapter.defaults) == "table", "adapter.defaults must be a table")
  check(type(adapter.defaults.timeout) == "number", "adapter.defaults.timeout must be a number of ms")
  check(type(adapter.defaults.mcpServers) == "table", "adapter.defaults.mcpServers must be a list")
  check(type(adapter.env or {}) == "table", "adapter.env must be a table")
  for key, value in pairs(adapter.env or {}) do
    check(type(key) == "string" and (type(value) == "string" or type(value) == "function"),
      string.format("adapter.env.%s must be a string or a function", tostring(key)))
  end
  local params = adapter.parameters
  check(type(params) == "table" and params.protocolVersion == 1, "adapter.parameters.protocolVersion must be 1")
  check(type(params.clientCapabilities) == "table", "adapter.parameters.clientCapabilities must be a table")
  local handlers = adapter.handlers
  check(type(handlers) == "table", "adapter.handlers must be a table")
  local setup = handlers.setup or (handlers.lifecycle and handlers.lifecycle.setup)
  local build = handlers.form_messages or (handlers.request and handlers.request.build_messages)
  check(type(setup) == "function", "the adapter has no setup handler")
  check(type(build) == "function", "the adapter has no form_messages/build_messages handler")
end

-- codecompanion.adapters ------------------------------------------------------

local adapters = {}

function adapters.extend(adapter, opts)
  table.insert(F.recorded, { call = "codecompanion.adapters.extend", adapter = adapter, opts = opts })
  opts = opts or {}
  check(type(opts) == "table", "extend(): opts must be a table")
  local base
  if type(adapter) == "string" then
    local builtin = BUILTIN_ACP[adapter]
    if builtin == nil then
      -- The real extend logs "Adapter not found" and returns nil.
      return nil
    end
    base = builtin()
  elseif type(adapter) == "function" then
    base = adapter()
  else
    base = adapter
  end
  check(type(base) == "table", "extend(): nothing to extend")
  return vim.tbl_deep_extend("force", {}, vim.deepcopy(base), opts)
end

-- codecompanion ---------------------------------------------------------------

local codecompanion = { config = nil }

function codecompanion.setup(config)
  table.insert(F.recorded, { call = "codecompanion.setup", config = config })
  check(type(config) == "table", "setup(): config must be a table")
  check(type(config.adapters) == "table" and type(config.adapters.acp) == "table",
    "setup(): ACP adapters go in adapters.acp")
  for name, adapter in pairs(config.adapters.acp) do
    if name ~= "opts" then
      local kind = type(adapter)
      check(kind == "function" or kind == "table" or kind == "string",
        string.format("adapters.acp.%s must be a function, a table or a name, got %s", name, kind))
    end
  end
  local chat = (config.interactions and config.interactions.chat) or (config.strategies and config.strategies.chat)
  if chat and chat.adapter then
    local name = type(chat.adapter) == "table" and chat.adapter.name or chat.adapter
    check(config.adapters.acp[name] ~= nil, string.format("the chat adapter `%s` is not in adapters.acp", tostring(name)))
  end
  codecompanion.config = config
end

-- Adapter.resolve for a name: extend what adapters.acp[name] holds.
function codecompanion.resolve(name)
  local config = codecompanion.config
  check(config ~= nil, "resolve() before setup()")
  local entry = config.adapters.acp[name]
  check(entry ~= nil, "adapter not found: " .. tostring(name))
  local adapter
  if type(entry) == "function" then
    adapter = entry()
  elseif type(entry) == "string" then
    adapter = adapters.extend(entry)
  else
    adapter = vim.deepcopy(entry)
  end
  F.check_codecompanion_adapter(adapter)
  adapter.commands.selected = adapter.commands.default
  return adapter
end

-- Connection:_setup_adapter: the argv and the env vim.system gets. An env value
-- that names a set variable is replaced by its value, "cmd:..." by the output
-- of the command, a function by its result; anything else is used as is.
function codecompanion.launch_spec(adapter)
  local env = {}
  for key, value in pairs(adapter.env or {}) do
    if type(value) == "function" then
      env[key] = value(adapter)
    elseif value:match("^cmd:") then
      env[key] = vim.fn.system(value:sub(5)):gsub("%s+$", "")
    elseif os.getenv(value) ~= nil then
      env[key] = os.getenv(value)
    else
      env[key] = value
    end
  end
  local setup = adapter.handlers.setup or adapter.handlers.lifecycle.setup
  check(setup(adapter) == true, "the adapter's setup handler did not return true")
  return {
    argv = vim.deepcopy(adapter.commands.selected or adapter.commands.default),
    env = env,
    clear_env = false,
    initialize = adapter.parameters,
    mcp_servers = adapter.defaults.mcpServers or {},
    timeout = adapter.defaults.timeout,
  }
end

-- avante ----------------------------------------------------------------------

local avante = { config = nil }

function avante.setup(config)
  table.insert(F.recorded, { call = "avante.setup", config = config })
  check(type(config) == "table", "setup(): config must be a table")
  check(type(config.provider) == "string", "setup(): `provider` must name a provider")
  check(type(config.acp_providers) == "table", "setup(): ACP agents go in `acp_providers`")
  for name, entry in pairs(config.acp_providers) do
    check(type(entry) == "table", string.format("acp_providers[%q] must be a table", name))
    check(type(entry.command) == "string" and entry.command ~= "",
      string.format("acp_providers[%q].command must be a non-empty string, got %s", name, vim.inspect(entry.command)))
    check(entry.args == nil or is_list_of_strings(entry.args),
      string.format("acp_providers[%q].args must be a list of strings, got %s", name, vim.inspect(entry.args)))
    for key, value in pairs(entry.env or {}) do
      -- avante builds "KEY=" .. value for uv.spawn
      check(type(key) == "string" and type(value) == "string",
        string.format("acp_providers[%q].env.%s must be a string", name, tostring(key)))
    end
  end
  avante.config = config
end

-- llm.lua: Config.acp_providers[Config.provider] is the agent; acp_client.lua
-- spawns it with PATH and the entry's env, nothing else.
function avante.launch_spec()
  local config = avante.config
  check(config ~= nil, "launch before setup()")
  local entry = config.acp_providers[config.provider]
  check(entry ~= nil, string.format("provider `%s` is not in acp_providers", config.provider))
  local env = { PATH = vim.fn.getenv("PATH") }
  for key, value in pairs(entry.env or {}) do
    env[key] = value
  end
  local argv = { entry.command }
  vim.list_extend(argv, entry.args or {})
  return {
    argv = argv,
    env = env,
    clear_env = true,
    initialize = { protocolVersion = 1, clientCapabilities = { fs = { readTextFile = true, writeTextFile = true } } },
    mcp_servers = {},
    timeout = entry.timeout or 20000,
  }
end

function F.install()
  package.loaded["codecompanion"] = codecompanion
  package.loaded["codecompanion.adapters"] = adapters
  package.loaded["avante"] = avante
end

F.codecompanion = codecompanion
F.avante = avante

return F
