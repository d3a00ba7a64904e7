package cost

import (
	"math"
	"strconv"
)

// Money is an amount of US dollars, counted in nanodollars (1e-9 USD):
// integer, so that sums are exact and replicas add them atomically; an
// int64 holds over nine billion dollars. Write an amount as
// cost.Dollars(5) or 5 * cost.Dollar.
type Money int64

// Dollar is one US dollar.
const Dollar Money = 1_000_000_000

// Dollars returns d US dollars as Money, rounded to the nanodollar;
// amounts beyond Money's range are clamped to it.
func Dollars(d float64) Money {
	n := math.Round(d * float64(Dollar))
	switch {
	case math.IsNaN(n):
		return 0
	case n >= math.MaxInt64:
		return math.MaxInt64
	case n <= math.MinInt64:
		return math.MinInt64
	}
	return Money(n)
}

// Dollars returns m in US dollars.
func (m Money) Dollars() float64 { return float64(m) / float64(Dollar) }

// String formats m in dollars with as many decimals as it needs, up to
// the millionth of a dollar: "$5", "$0.0042", "$0.000001"; "-$0.5" for a
// negative amount.
func (m Money) String() string {
	sign := ""
	if m < 0 {
		sign, m = "-", -m
	}
	micro := (int64(m) + 500) / 1000 // to the microdollar, rounded
	return sign + "$" + strconv.FormatFloat(float64(micro)/1e6, 'f', -1, 64)
}
