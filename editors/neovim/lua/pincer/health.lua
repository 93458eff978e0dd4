-- :checkhealth pincer — is the configured Pincer found, does it run, what does
-- `pincer doctor` say with the same config file and environment.

local M = {}

-- vim.health.start/ok/... from Neovim 0.10; report_* in 0.8 and 0.9; the
-- `health` module in 0.7.
local function reporter()
  local h = vim.health
  if h == nil then
    h = require("health")
  end
  return {
    start = h.start or h.report_start,
    ok = h.ok or h.report_ok,
    info = h.info or h.report_info,
    warn = h.warn or h.report_warn,
    error = h.error or h.report_error,
  }
end

-- Run argv to completion, with `env` added to Neovim's environment.
-- Returns the exit code (nil when it could not start or timed out), stdout and
-- stderr as lists of lines, and a reason when there is no exit code.
local function run(argv, env, timeout_ms)
  local stdout, stderr, code = {}, {}, nil
  local job_opts = {
    stdout_buffered = true,
    stderr_buffered = true,
    on_stdout = function(_, data)
      stdout = data
    end,
    on_stderr = function(_, data)
      stderr = data
    end,
    on_exit = function(_, exit_code)
      code = exit_code
    end,
  }
  if next(env) ~= nil then
    job_opts.env = env
  end
  local started, job = pcall(vim.fn.jobstart, argv, job_opts)
  if not started or job <= 0 then
    return nil, {}, {}, string.format("could not start %s", table.concat(argv, " "))
  end
  local finished = vim.wait(timeout_ms, function()
    return code ~= nil
  end, 20)
  if not finished then
    vim.fn.jobstop(job)
    return nil, stdout, stderr, string.format("%s did not finish in %d ms", table.concat(argv, " "), timeout_ms)
  end
  -- The buffered output callbacks may come just after on_exit.
  vim.wait(200, function()
    return #stdout > 0 or #stderr > 0
  end, 10)
  return code, stdout, stderr, nil
end

local function nonempty(lines)
  local out = {}
  for _, line in ipairs(lines) do
    if line ~= "" then
      table.insert(out, line)
    end
  end
  return out
end

local function has_flag(argv, flag)
  for _, arg in ipairs(argv) do
    if arg == flag then
      return true
    end
  end
  return false
end

function M.check()
  local report = reporter()
  local pincer = require("pincer")
  local o = pincer.options()
  local argv = pincer.command()

  report.start("pincer: Neovim")
  local version = vim.version()
  report.info(string.format("Neovim %d.%d.%d", version.major, version.minor, version.patch))
  if vim.fn.has("nvim-0.11") == 1 then
    report.ok("Neovim 0.11 or later: avante.nvim and CodeCompanion.nvim can run here")
  else
    report.warn("this plugin works here, but recent avante.nvim and CodeCompanion.nvim releases need Neovim 0.11 or later")
  end
  for _, client in ipairs({ { "codecompanion", "CodeCompanion.nvim" }, { "avante", "avante.nvim" } }) do
    local found = #vim.api.nvim_get_runtime_file("lua/" .. client[1] .. "/init.lua", false) > 0
    report.info(string.format("%s %s", client[2], found and "is installed" or "is not on the runtimepath"))
  end

  report.start("pincer: the agent")
  if pincer.is_setup() then
    report.info("launch command: " .. table.concat(argv, " "))
  else
    report.info("require(\"pincer\").setup() was not called; checking the defaults: " .. table.concat(argv, " "))
  end

  if vim.fn.executable(o.cmd) ~= 1 then
    report.error(string.format("`%s` is not an executable on PATH", o.cmd), {
      "install Pincer (cargo install --locked --path . in its repository) so `pincer` is on PATH",
      "or set `cmd` to the binary's absolute path in require(\"pincer\").setup()",
    })
    return
  end
  report.ok(string.format("found `%s` at %s", o.cmd, vim.fn.exepath(o.cmd)))

  local env = pincer.env()
  local code, stdout, stderr, reason = run({ o.cmd, "--version" }, env, 10000)
  if code ~= 0 then
    report.error(string.format("`%s --version` failed: %s", o.cmd, reason or table.concat(nonempty(stderr), " ")))
    return
  end
  report.ok(string.format("`%s --version` runs: %s", o.cmd, table.concat(nonempty(stdout), " ")))

  code, stdout, stderr, reason = run({ o.cmd, "acp", "--help" }, env, 10000)
  if code ~= 0 then
    report.error(string.format("`%s acp --help` failed: %s", o.cmd, reason or table.concat(nonempty(stderr), " ")),
      { "this binary has no `acp` command: is `cmd` really Pincer?" })
    return
  end
  report.ok(string.format("`%s acp` is available", o.cmd))

  -- The provider may come from the launch command rather than the config file.
  local provider_by_flag = has_flag(argv, "--provider") or has_flag(argv, "--script")
  local doctor = { o.cmd, "doctor" }
  for i, arg in ipairs(argv) do
    if arg == "--config" and argv[i + 1] then
      vim.list_extend(doctor, { "--config", argv[i + 1] })
    end
  end
  code, stdout, stderr, reason = run(doctor, env, 30000)
  if code == nil then
    report.error(string.format("`%s doctor` did not run: %s", o.cmd, reason))
    return
  end
  report.start("pincer: pincer doctor (same config and environment)")
  for _, line in ipairs(nonempty(stdout)) do
    local status, rest = line:match("^(%S+)%s+(.*)$")
    local detail = rest and rest:gsub("%s%s+", ": ", 1) or line
    if status == "ok" then
      report.ok(detail)
    elseif status == "FAIL" and provider_by_flag and detail:match("^provider") then
      report.info(detail .. " (the launch command names the provider, so this is expected)")
    elseif status == "FAIL" then
      report.error(detail)
    else
      report.info(line)
    end
  end
  for _, line in ipairs(nonempty(stderr)) do
    report.info(line)
  end
  if code ~= 0 and not provider_by_flag then
    report.warn(string.format("`%s doctor` exited with %d", o.cmd, code), {
      "run `pincer login`, configure a provider in the config file (docs/providers.md), or pass one in `provider`",
    })
  end
end

return M
