-- Pincer as an ACP adapter for CodeCompanion.nvim (https://codecompanion.olimorris.dev).
-- Put this in your CodeCompanion setup (for example lua/plugins/codecompanion.lua).
-- It extends a built-in ACP adapter, as CodeCompanion's docs show, and swaps the
-- command for `pincer acp`. Pincer needs no authentication.
require("codecompanion").setup({
  adapters = {
    acp = {
      pincer = function()
        return require("codecompanion.adapters").extend("gemini_cli", {
          name = "pincer",
          formatted_name = "Pincer",
          commands = {
            default = { "pincer", "acp" },
          },
          defaults = {
            timeout = 20000, -- ms to wait for the agent to start
          },
        })
      end,
    },
  },
  strategies = {
    chat = { adapter = "pincer" },
  },
})
