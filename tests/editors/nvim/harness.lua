-- What the headless Neovim test scripts share: run the body with a report table, keep an
-- error in it, write it to $RUNFIX_NVIM_REPORT as JSON (tests/test_nvim.py reads it), quit.
local M = {}

function M.run(body)
  local report = {}
  local ok, err = pcall(body, report)
  if not ok then
    report.error = tostring(err)
  end
  local f = assert(io.open(os.getenv("RUNFIX_NVIM_REPORT"), "w"))
  f:write(vim.fn.json_encode(report))
  f:close()
  vim.cmd("qall!")
end

return M
