-- Headless Neovim test (issue 60): with nvim-dap there (a stand-in that keeps what it is asked:
-- nvim-dap is on no registry this project may use), the plugin registers `runfix dap` as its
-- adapter, the server offers "Debug cell" lenses, and :RunfixDebugCell asks nvim-dap to launch
-- the cell. The test then speaks DAP to that adapter with that launch (what nvim-dap would),
-- while this Neovim's runfix holds the folder, until it writes $RUNFIX_NVIM_DONE.
local harness = dofile(debug.getinfo(1, "S").source:sub(2):match("(.*/)") .. "harness.lua")

local launched = {}
package.loaded["dap"] = {
  adapters = {},
  configurations = {},
  run = function(config)
    table.insert(launched, config)
  end,
}

harness.run(function(report)
  local runfix = harness.setup(report)
  vim.cmd("edit " .. vim.fn.fnameescape(os.getenv("RUNFIX_NVIM_FILE")))
  vim.bo.filetype = "python"
  report.version = tostring(vim.version().major) .. "." .. tostring(vim.version().minor)
  report.attached = vim.wait(20000, function()
    return runfix.client(0) ~= nil
  end, 50)
  local ran = vim.lsp.buf_request_sync(0, "workspace/executeCommand",
    { command = "runfix.run", arguments = { { uri = vim.uri_from_bufnr(0) } } }, 60000) or {}
  for _, answer in pairs(ran) do
    report.ran = answer.result and answer.result.status
  end
  local lenses = vim.lsp.buf_request_sync(0, "textDocument/codeLens",
    { textDocument = vim.lsp.util.make_text_document_params() }, 10000) or {}
  report.lenses = {}
  for _, answer in pairs(lenses) do
    for _, lens in ipairs(answer.result or {}) do
      table.insert(report.lenses, lens.command.title)
    end
  end
  vim.api.nvim_win_set_cursor(0, { 10, 0 })
  vim.cmd("RunfixDebugCell")
  report.adapter = require("dap").adapters.runfix
  report.launched = launched
  report.configured = #require("dap").configurations.python
  local ready = assert(io.open(os.getenv("RUNFIX_NVIM_READY"), "w"))
  ready:write(vim.fn.json_encode(report))
  ready:close()
  report.done = vim.wait(120000, function()
    return vim.loop.fs_stat(os.getenv("RUNFIX_NVIM_DONE")) ~= nil
  end, 100)
end)
