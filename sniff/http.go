package sniff

// httpMethods are the HTTP/1.x request methods the detector accepts, each
// with the space that ends the token. Methods are case-sensitive (RFC 9110).
var httpMethods = [...]string{
	"GET ", "POST ", "PUT ", "DELETE ", "HEAD ", "OPTIONS ", "PATCH ", "CONNECT ", "TRACE ",
}

// DetectHTTP recognises an HTTP/1.x request line by its method token and
// the following space. A proper prefix of a method says NeedMore with the
// length of the shortest method it could still become.
func DetectHTTP(p []byte) (Verdict, int) {
	if len(p) > 0 && !httpMethodStart(p[0]) {
		return No, 0 // most binary flows end here without a string compare
	}
	need := 0
	for _, method := range httpMethods {
		if len(p) >= len(method) {
			if string(p[:len(method)]) == method {
				return Match, 0
			}
			continue
		}
		if string(p) == method[:len(p)] && (need == 0 || len(method) < need) {
			need = len(method)
		}
	}
	if need > 0 {
		return NeedMore, need
	}
	return No, 0
}

// httpMethodStart reports whether c is the first letter of a method in
// httpMethods.
func httpMethodStart(c byte) bool {
	switch c {
	case 'G', 'P', 'D', 'H', 'O', 'C', 'T':
		return true
	}
	return false
}
