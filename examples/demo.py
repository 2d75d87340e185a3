# A small session: runfix runs each cell in one kernel, so state carries over.
# Try it: runfix run examples/demo.py

# %% Prices
import math

prices = {"tea": 3.5, "cake": 4.2, "scone": 2.8}
total = sum(prices.values())
print("total", round(total, 2))

# %% A value: the last expression of a statement shows up as a result
math.pi * 6

# %% An error, reported on the line that raised
def price_of(item):
    return prices[item]


price_of("coffee")
