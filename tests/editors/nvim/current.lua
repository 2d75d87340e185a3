-- Headless current Neovim (0.11+): the server configured only through `lsp/runfix.lua`
-- (`vim.lsp.config` + `vim.lsp.enable`, no setup()), a run, and the result as an inlay hint.
-- Writes $RUNFIX_NVIM_REPORT as JSON (tests/test_nvim.py asserts).
local harness = dofile(debug.getinfo(1, "S").source:sub(2):match("(.*/)") .. "harness.lua")

harness.run(function(report)
  vim.opt.runtimepath:prepend(os.getenv("RUNFIX_NVIM_PLUGIN"))
  report.version = tostring(vim.version())
  local python = os.getenv("RUNFIX_NVIM_PYTHON")
  vim.lsp.config("runfix", {
    cmd = vim.fn.json_decode(os.getenv("RUNFIX_NVIM_CMD")),
    init_options = { python = python },
    settings = { runfix = { python = python } },
  })
  vim.lsp.enable("runfix")
  vim.cmd("edit " .. vim.fn.fnameescape(os.getenv("RUNFIX_NVIM_FILE")))
  vim.bo.filetype = "python"
  local client
  report.attached = vim.wait(20000, function()
    client = vim.lsp.get_clients({ bufnr = 0, name = "runfix" })[1]
    return client ~= nil and client.initialized
  end, 50)
  report.root = client and client.root_dir
  local params = { command = "runfix.run", arguments = { { uri = vim.uri_from_bufnr(0) } } }
  client:request("workspace/executeCommand", params, function(_, result)
    report.answer = result
  end, 0)
  report.hinted = vim.wait(60000, function()
    local labels = {}
    for _, item in ipairs(vim.lsp.inlay_hint.get({ bufnr = 0 })) do
      local label = item.inlay_hint.label
      if type(label) == "table" then
        label = table.concat(vim.tbl_map(function(part) return part.value end, label))
      end
      labels[#labels + 1] = { line = item.inlay_hint.position.line, label = label }
    end
    report.hints = labels
    return #labels > 0
  end, 50)
  report.enabled = vim.lsp.inlay_hint.is_enabled({ bufnr = 0 })
end)
