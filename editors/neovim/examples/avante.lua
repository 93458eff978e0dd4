-- Pincer as avante.nvim's ACP provider (docs/editors.md quotes this file; the
-- CI test loads it as it is).
require("pincer").setup({
  mode = "supervised", -- edits and commands ask first
})
require("avante").setup({
  provider = "pincer",
  acp_providers = { pincer = require("pincer").avante_provider() },
  behaviour = {
    -- avante answers Pincer's permission requests itself ("allow") unless
    -- this is false; then they wait for your click in the sidebar.
    auto_approve_tool_permissions = false,
  },
})
