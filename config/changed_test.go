package config

import (
	"slices"
	"testing"
)

func TestChanged(t *testing.T) {
	a, err := Parse(DefaultYAML)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse(DefaultYAML)
	if err != nil {
		t.Fatal(err)
	}
	if got := Changed(a, b); len(got) != 0 {
		t.Fatalf("the same config: changed %v", got)
	}
	b.Sniff.Budget++
	b.Admin.Operator.Allow = append(b.Admin.Operator.Allow, "10.0.0.0/8")
	b.Routes = b.Routes[1:]
	b.Pools = map[string]Pool{"extra": {}}
	for k, v := range a.Pools {
		b.Pools[k] = v
	}
	b.Log.Level = "debug"
	want := []string{"sniff.budget", "pools.extra", "routes", "admin.operator.allow", "log.level"}
	if got := Changed(a, b); !slices.Equal(got, want) {
		t.Fatalf("changed %v, want %v", got, want)
	}
}
