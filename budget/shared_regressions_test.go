package budget

import (
	"context"
	"testing"

	"github.com/backstop-llm/backstop/internal/redistest"
)

// Found in review: on a real Redis (Lua 5.1's tonumber accepts "nan"), a foreign
// field whose epoch parses as NaN passes both window comparisons, so it is
// counted and never deleted, contrary to "fields it did not write are
// deleted, not counted": here it exhausts the budget for as long as the
// key lives, and every write refreshes the key's TTL.
func TestSharedNaNFieldsAreForeign(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	key := redistest.Prefix(t) + "budget"
	if err := c.HSet(ctx, key, "rnan", "1000").Err(); err != nil {
		t.Fatal(err)
	}
	s := newTestShared(t, c, key, SharedOptions{})
	if n := grantAll(t, ctx, s, 100); n != 10 {
		t.Errorf("granted %d; want the floor, 10 (the foreign field not counted)", n)
	}
	if ok, _ := c.HExists(ctx, key, "rnan").Result(); ok {
		t.Errorf("the foreign field rnan is still in %s after the script's writes", key)
	}
}
