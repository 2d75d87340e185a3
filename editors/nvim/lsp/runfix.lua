-- runfix for Neovim 0.11+ as nvim-lspconfig ships servers: with editors/nvim on
-- 'runtimepath', `vim.lsp.enable("runfix")` is enough (settings: `vim.lsp.config("runfix",
-- { settings = { runfix = { timeout = 60 } }, init_options = { timeout = 60 } })`).
-- The user commands (:RunfixRun, …) come with require("runfix").setup().
return require("runfix").lsp_config()
