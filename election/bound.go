package election

import "github.com/sqlelect/sqlelect/internal/stmt"

// stmtBounder is a backend that knows its server's stmt.Bound once its
// preflight ran.
type stmtBounder interface{ stmtBound() stmt.Bound }

// stmtBound returns b's stmt.Bound, or the zero bound (none).
func stmtBound(b backend) stmt.Bound {
	if sb, ok := b.(stmtBounder); ok {
		return sb.stmtBound()
	}
	return stmt.Bound{}
}

func (t *tableBackend) stmtBound() stmt.Bound { return t.bound.Load() }
func (b *lockBackend) stmtBound() stmt.Bound  { return b.bound.Load() }
