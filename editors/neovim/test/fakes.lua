-- A stand-in for avante.nvim, for run.lua: the plugin's own test, on Neovim
-- 0.7 (avante needs 0.11) and on a plain clone (no snapshot of avante). The
-- real avante.nvim is driven in avante.lua, CodeCompanion.nvim in
-- codecompanion.lua. It records what it is given, rejects shapes avante
-- documents as wrong, and launches an agent the way avante does:
-- lua/avante/libs/acp_client.lua (uv.spawn with PATH plus the provider's env
-- only).

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
  package.loaded["avante"] = avante
end

F.avante = avante

return F
