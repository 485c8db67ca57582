package adoption

import "testing"

// TestClassify: the layouts sqlelect's migrations (package schema) and its
// preflight errors (package election) both tell apart, through Classify.
func TestClassify(t *testing.T) {
	col := func(name, data, key string) Column { return Column{Name: name, Type: data, Data: data, Key: key} }
	anchor, service, seen := col("anchor", "tinyint", "PRI"), col("service_id", "varchar", ""), col("last_seen_active", "timestamp", "")
	v1 := make([]Column, len(V1Columns))
	for i, n := range V1Columns {
		v1[i] = col(n, "int", "")
	}
	for _, tc := range []struct {
		name string
		cols []Column
		want Kind
	}{
		{"missing", nil, KindMissing},
		{"sqlelect v1", v1, KindSqlelect},
		{"sqlelect v5", append(append([]Column{}, v1...), col("transfer_to", "varchar", ""), col("priority", "int", "")), KindSqlelect},
		{"sqlelect without a column", v1[:len(v1)-1], KindForeign},
		{"recipe", []Column{anchor, service, seen}, KindRecipe},
		{"recipe, columns in another order", []Column{seen, anchor, service}, KindRecipe},
		{"recipe, bigint anchor, char holder", []Column{col("anchor", "bigint", "PRI"), col("service_id", "char", ""), seen}, KindRecipe},
		{"recipe plus a column", []Column{anchor, service, seen, col("note", "text", "")}, KindForeign},
		{"recipe with host", []Column{anchor, col("host", "varchar", ""), seen}, KindForeign},
		{"recipe, anchor not the key", []Column{col("anchor", "tinyint", ""), service, seen}, KindForeign},
		{"recipe, string anchor", []Column{col("anchor", "varchar", "PRI"), service, seen}, KindForeign},
		{"recipe, datetime", []Column{anchor, service, col("last_seen_active", "datetime", "")}, KindForeign},
		{"recipe, integer holder", []Column{anchor, col("service_id", "int", ""), seen}, KindForeign},
		{"other", []Column{col("id", "int", "PRI"), col("name", "varchar", "")}, KindForeign},
	} {
		if got := Classify(tc.cols); got != tc.want {
			t.Errorf("%s: Classify = %d, want %d", tc.name, got, tc.want)
		}
	}
}
