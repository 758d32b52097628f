/**
 * Agents identified by TLS client certificates (`--client-ca FILE`): the collector's TLS server
 * asks every peer for a certificate (requestCert) without requiring one (the HTTP API's users
 * authenticate with bearer tokens), and an agent upgrade is accepted here only when the peer sent
 * a certificate that chains to the client CA and is valid now (Node's `socket.authorized`). The
 * certificate's subject CN is the node it may speak for, e.g.
 *
 *   openssl req -new -key node-a.key -subj /CN=node-a | openssl x509 -req -CA ca.pem -CAkey ca.key …
 */
import { TLSSocket } from 'node:tls';
import { K8S_NODE_NAME_RE, type AgentAuthenticator, type AuthRequest } from './agent-auth';

export function clientCertAuth(): AgentAuthenticator {
  return {
    description: 'TLS client certificates of the client CA (subject CN = node)',
    authenticate(req: AuthRequest) {
      const s = req.socket;
      if (!(s instanceof TLSSocket))
        return { ok: false, status: 401, reason: 'no TLS: no client certificate' };
      const cert = s.getPeerCertificate();
      if (Object.keys(cert).length === 0)
        return { ok: false, status: 401, reason: 'no client certificate' };
      if (!s.authorized)
        return {
          ok: false,
          status: 401,
          reason: `client certificate refused (${String(s.authorizationError)})`,
        };
      const cn = cert.subject.CN;
      const node = Array.isArray(cn) ? undefined : cn;
      if (node === undefined || !K8S_NODE_NAME_RE.test(node))
        return {
          ok: false,
          status: 401,
          reason: 'the client certificate has no subject CN that is a node name',
        };
      return {
        ok: true,
        identity: { method: 'client-cert', node, subject: `certificate CN=${node}` },
      };
    },
  };
}
