package election

import "github.com/sqlelect/sqlelect/internal/stmt"

func (t *tableBackend) stmtBound() stmt.Bound { return t.bound.Load() }
func (b *lockBackend) stmtBound() stmt.Bound  { return b.bound.Load() }
