package document

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"
)

// TokenTimes reads the expiry and issue times a bearer token states about itself: the
// "exp" and "iat" claims of a JWT (as ServiceAccount tokens are), unverified. ok is false
// for a token that is not a JWT or states no expiry. The times say only what the token
// claims: a caller that relies on a token replaces nothing before the token has
// authenticated against the server it is for.
func TokenTimes(token string) (exp, iat time.Time, ok bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || len(parts[1]) > 8192 {
		return time.Time{}, time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, time.Time{}, false
	}
	var claims struct {
		Exp *json.Number `json:"exp"`
		Iat *json.Number `json:"iat"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp == nil {
		return time.Time{}, time.Time{}, false
	}
	e, err := claims.Exp.Int64()
	if err != nil || e <= 0 {
		return time.Time{}, time.Time{}, false
	}
	exp = time.Unix(e, 0).UTC()
	if claims.Iat != nil {
		if i, err := claims.Iat.Int64(); err == nil && i > 0 {
			iat = time.Unix(i, 0).UTC()
		}
	}
	return exp, iat, true
}

// Read returns what a reader kubeconfig holds (its current context), or ok false when
// Load refuses it. ClusterName is left empty.
func Read(data []byte) (r Reader, ok bool) {
	c, err := Load(data)
	if err != nil {
		return Reader{}, false
	}
	return Reader{Server: c.Server, CAData: c.CAData, Token: c.Token}, true
}
