-- Headless Neovim (0.7.2 and current): a coding agent runs a line of the open file through
-- `runfix mcp` (tests/test_nvim.py plays the agent once $RUNFIX_NVIM_READY appears); the
-- user allows it in the consent picker (vim.ui.select), and the agent's result shows on
-- the line: an inlay hint where Neovim has them, else a diagnostic. The report has the
-- question, what showed and runfix's hover there. Writes $RUNFIX_NVIM_REPORT as JSON.
local harness = dofile(debug.getinfo(1, "S").source:sub(2):match("(.*/)") .. "harness.lua")

harness.run(function(report)
  report.questions = {}
  vim.ui.select = function(items, opts, on_choice)
    table.insert(report.questions, opts.prompt)
    for _, item in ipairs(items) do
      if item.title == "Allow for this session" then
        return on_choice(item)
      end
    end
    on_choice(nil)
  end
  local runfix = harness.open(report)
  report.attached = vim.wait(20000, function()
    local client = runfix.client(0)
    return client ~= nil and client.initialized
  end, 50)
  local ready = assert(io.open(os.getenv("RUNFIX_NVIM_READY"), "w"))
  ready:write("ready")
  ready:close()
  local hints = vim.lsp.inlay_hint ~= nil
  if hints then
    vim.lsp.inlay_hint.enable(true, { bufnr = 0 })
  end
  report.shown = vim.wait(90000, function()
    local seen = {}
    if hints then
      for _, item in ipairs(vim.lsp.inlay_hint.get({ bufnr = 0 })) do
        local label = item.inlay_hint.label
        if type(label) == "table" then
          label = table.concat(vim.tbl_map(function(part) return part.value end, label))
        end
        table.insert(seen, { line = item.inlay_hint.position.line, text = label })
      end
    else
      for _, d in ipairs(vim.diagnostic.get(0)) do
        table.insert(seen, { line = d.lnum, text = d.message })
      end
    end
    report.seen = seen
    return #seen > 0
  end, 50)
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(0) },
    position = { line = 1, character = 0 },
  }
  local answer = runfix.client(0).request_sync("textDocument/hover", params, 10000, 0)
  report.hover = answer and answer.result and answer.result.contents.value
end)
