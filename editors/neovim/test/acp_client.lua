-- A minimal ACP client for the tests: starts a process with jobstart and
-- speaks newline-delimited JSON-RPC 2.0 over its stdin/stdout.

local Client = {}
Client.__index = Client

local function encode(value)
  return vim.fn.json_encode(value)
end

---@param argv string[]
---@param opts { env?: table<string,string>, clear_env?: boolean, cwd?: string }
function Client.start(argv, opts)
  local self = setmetatable({
    argv = argv,
    messages = {}, -- every message received, in order
    responses = {}, -- id -> message
    notifications = {}, -- session/update params, in order
    stderr = {},
    partial = "",
    exit_code = nil,
    next_id = 1,
  }, Client)
  local job_opts = {
    on_stdout = function(_, data)
      self:_on_stdout(data)
    end,
    on_stderr = function(_, data)
      for _, line in ipairs(data) do
        if line ~= "" then
          table.insert(self.stderr, line)
        end
      end
    end,
    on_exit = function(_, code)
      self.exit_code = code
    end,
  }
  if opts.env and next(opts.env) ~= nil then
    job_opts.env = opts.env
  end
  job_opts.clear_env = opts.clear_env or false
  job_opts.cwd = opts.cwd
  local ok, job = pcall(vim.fn.jobstart, argv, job_opts)
  if not ok or job <= 0 then
    error(string.format("could not start %s: %s", table.concat(argv, " "), tostring(job)), 0)
  end
  self.job = job
  return self
end

-- jobstart delivers stdout as a list: the first item continues the last
-- unfinished line, the last item is the start of the next one.
function Client:_on_stdout(data)
  for i, chunk in ipairs(data) do
    if i == 1 then
      self.partial = self.partial .. chunk
    else
      self:_on_line(self.partial)
      self.partial = chunk
    end
  end
end

function Client:_on_line(line)
  if line == "" then
    return
  end
  local ok, message = pcall(vim.fn.json_decode, line)
  if not ok or type(message) ~= "table" then
    table.insert(self.messages, { invalid = line })
    return
  end
  table.insert(self.messages, message)
  if message.method ~= nil and message.id ~= nil then
    -- A request from the agent (permission, fs): the tests never expect one.
    self:send({ jsonrpc = "2.0", id = message.id, error = { code = -32601, message = "not supported by the test client" } })
  elseif message.method == "session/update" then
    table.insert(self.notifications, message.params)
  elseif message.id ~= nil then
    self.responses[message.id] = message
  end
end

function Client:send(message)
  vim.fn.chansend(self.job, encode(message) .. "\n")
end

function Client:describe_failure()
  local lines = { "command: " .. table.concat(self.argv, " ") }
  if self.exit_code ~= nil then
    table.insert(lines, "exited with " .. self.exit_code)
  end
  for _, line in ipairs(self.stderr) do
    table.insert(lines, "stderr: " .. line)
  end
  for _, message in ipairs(self.messages) do
    table.insert(lines, "received: " .. (message.invalid or encode(message)))
  end
  return table.concat(lines, "\n")
end

---Send a request and wait for its response; errors on timeout, an error
---response, or the process exiting first.
function Client:request(method, params, timeout_ms)
  local id = self.next_id
  self.next_id = id + 1
  self:send({ jsonrpc = "2.0", id = id, method = method, params = params })
  local done = vim.wait(timeout_ms or 20000, function()
    return self.responses[id] ~= nil or self.exit_code ~= nil
  end, 10)
  local response = self.responses[id]
  if response == nil then
    error(string.format("%s: no response (%s)\n%s", method, done and "the agent exited" or "timed out",
      self:describe_failure()), 0)
  end
  if response.error ~= nil then
    error(string.format("%s: error response %s\n%s", method, encode(response.error), self:describe_failure()), 0)
  end
  return response.result
end

function Client:wait_exit(timeout_ms)
  vim.wait(timeout_ms or 10000, function()
    return self.exit_code ~= nil
  end, 10)
  return self.exit_code
end

function Client:stop()
  if self.exit_code == nil then
    vim.fn.chanclose(self.job, "stdin")
    if self:wait_exit(10000) == nil then
      vim.fn.jobstop(self.job)
    end
  end
  return self.exit_code
end

return Client
