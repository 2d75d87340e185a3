-- Headless Neovim test (0.7.2 and current): completion from the live kernel beside a static
-- Python server (basedpyright). The file runs, then `df["` and `cfg.` are completed through
-- every attached client, as omnifunc and the built-in completion ask them; the report has
-- each server's labels and runfix's hover on `df`. Writes $RUNFIX_NVIM_REPORT as JSON.
local harness = dofile(debug.getinfo(1, "S").source:sub(2):match("(.*/)") .. "harness.lua")

harness.run(function(report)
  local runfix = harness.open(report)
  local static = vim.lsp.start_client({
    name = "basedpyright",
    cmd = { os.getenv("RUNFIX_NVIM_STATIC"), "--stdio" },
    root_dir = vim.fn.getcwd(),
  })
  vim.lsp.buf_attach_client(0, static)
  report.attached = vim.wait(20000, function()
    local other = vim.lsp.get_client_by_id(static)
    return runfix.client(0) ~= nil and other ~= nil and other.initialized
  end, 50)
  local done = false
  runfix.client(0).request("workspace/executeCommand", {
    command = "runfix.run",
    arguments = { { uri = vim.uri_from_bufnr(0) } },
  }, function(_, result)
    report.status = result and result.status
    done = true
  end, 0)
  report.ran = vim.wait(90000, function() return done end, 50)

  local function labels_at(text)
    -- type `text` as a new last line, then ask every client, as the completion UIs do
    local last = vim.api.nvim_buf_line_count(0)
    vim.api.nvim_buf_set_lines(0, last, last, false, { text })
    vim.wait(500) -- didChange is debounced (150 ms): let the servers have the new line first
    -- the cursor after the text, where insert mode has it (normal mode stops on the last
    -- character)
    local params = {
      textDocument = { uri = vim.uri_from_bufnr(0) },
      position = { line = last, character = #text },
    }
    local answers = vim.lsp.buf_request_sync(0, "textDocument/completion", params, 10000) or {}
    local by = {}
    for id, answer in pairs(answers) do
      local name = vim.lsp.get_client_by_id(id).name
      local items = answer.result and (answer.result.items or answer.result) or {}
      by[name] = {}
      for _, item in ipairs(items) do
        local where = item.labelDetails and item.labelDetails.description or ""
        table.insert(by[name], { label = item.label, where = where })
      end
    end
    return by
  end
  report.keys = labels_at('df["')
  report.attributes = labels_at("cfg.")
  report.names = labels_at("only")
  vim.api.nvim_win_set_cursor(0, { 2, 0 })
  local hovers = vim.lsp.buf_request_sync(0, "textDocument/hover", vim.lsp.util.make_position_params(), 10000) or {}
  for id, answer in pairs(hovers) do
    if vim.lsp.get_client_by_id(id).name == "runfix" and answer.result then
      report.hover = answer.result.contents.value
    end
  end
end)
