-- Pincer as CodeCompanion.nvim's chat agent (README.md and docs/editors.md
-- quote this file; the CI test loads it as it is).
require("pincer").setup({
  mode = "supervised", -- edits and commands ask first
})
require("codecompanion").setup({
  adapters = { acp = { pincer = require("pincer").codecompanion_adapter } },
  interactions = { chat = { adapter = "pincer" } },
})
