"""Security: mTLS, the PKI, CSRs, authorization, the secure-sum mask, the mix-net, a
hospital's policy, log hygiene."""
