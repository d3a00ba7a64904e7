package sdktest

import (
	"reflect"
	"strings"
	"testing"
)

// checkRequired fails t for every field of v (an SDK response type, walked
// recursively) that the SDK marks required (api:"required" or
// json:",required") but whose JSON metadata says was absent from the body.
// A union is checked through its AsAny variant.
func checkRequired(t *testing.T, path string, v any) {
	t.Helper()
	walkRequired(t, path, reflect.ValueOf(v), 0)
}

func walkRequired(t *testing.T, path string, v reflect.Value, depth int) {
	t.Helper()
	if depth > 12 || !v.IsValid() {
		return
	}
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return
		}
		walkRequired(t, path, v.Elem(), depth+1)
		return
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			walkRequired(t, path+"["+itoa(i)+"]", v.Index(i), depth+1)
		}
		return
	case reflect.Struct:
	default:
		return
	}
	if m := v.MethodByName("AsAny"); m.IsValid() && m.Type().NumIn() == 0 && m.Type().NumOut() == 1 {
		walkRequired(t, path+"(variant)", m.Call(nil)[0], depth+1)
		// The union's own fields carry no required tags; the variant's do.
	}
	meta := v.FieldByName("JSON")
	if !meta.IsValid() || meta.Kind() != reflect.Struct {
		return
	}
	typ := v.Type()
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if !f.IsExported() || f.Name == "JSON" {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		required := f.Tag.Get("api") == "required" || strings.Contains(","+opts+",", ",required,")
		mf := meta.FieldByName(f.Name)
		if !mf.IsValid() {
			continue
		}
		raw := mf.MethodByName("Raw").Call(nil)[0].String()
		if required && raw == "" {
			t.Errorf("%s.%s: required by the SDK, missing from the fake's JSON", path, name)
		}
		if raw != "" && raw != "null" && !mf.MethodByName("Valid").Call(nil)[0].Bool() {
			t.Errorf("%s.%s: the SDK could not decode %s", path, name, raw)
		}
		if raw != "" && raw != "null" {
			walkRequired(t, path+"."+name, v.Field(i), depth+1)
		}
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}
