package cost

import "context"

type keyCtx struct{}

// WithKey returns a copy of ctx saying whose money a call made with it
// spends: a tenant, a user, a feature, as the caller chooses. Money
// budgets that take their key from the context (spend.Config's default)
// and the cost metric's backstop.budget.key attribute read it.
func WithKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyCtx{}, key)
}

// Key returns the key WithKey put on ctx; "" when none.
func Key(ctx context.Context) string {
	k, _ := ctx.Value(keyCtx{}).(string)
	return k
}
