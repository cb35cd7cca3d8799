package config

import (
	"reflect"
	"slices"
	"strings"
)

// Changed names the keys whose values differ between a and b, as dotted
// paths the way the YAML spells them ("sniff.budget",
// "admin.operator.allow"), in the order of the file's sections. A map or
// a list counts as one value: "routes" rather than which route,
// "pools.private" for one pool. A reload logs them.
func Changed(a, b Config) []string {
	var out []string
	changed(reflect.ValueOf(a), reflect.ValueOf(b), "", &out)
	return out
}

func changed(a, b reflect.Value, path string, out *[]string) {
	switch {
	case a.Kind() == reflect.Struct:
		t := a.Type()
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			if name == "-" || !t.Field(i).IsExported() {
				continue
			}
			if name == "" {
				name = strings.ToLower(t.Field(i).Name)
			}
			changed(a.Field(i), b.Field(i), join(path, name), out)
		}
	case a.Kind() == reflect.Map && a.Type().Key().Kind() == reflect.String:
		keys := map[string]bool{}
		for _, k := range append(a.MapKeys(), b.MapKeys()...) {
			keys[k.String()] = true
		}
		names := make([]string, 0, len(keys))
		for k := range keys {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			va, vb := a.MapIndex(reflect.ValueOf(k)), b.MapIndex(reflect.ValueOf(k))
			if !va.IsValid() || !vb.IsValid() || !reflect.DeepEqual(va.Interface(), vb.Interface()) {
				*out = append(*out, join(path, k))
			}
		}
	case !reflect.DeepEqual(a.Interface(), b.Interface()):
		*out = append(*out, path)
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
