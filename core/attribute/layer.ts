/** The layers a verdict can name: which hop rewrote the source, or what happened instead. */
export type Layer =
  | 'preserved'
  | 'vpn-pod'
  | 'cni-masquerade'
  | 'kube-proxy'
  | 'proxy'
  | 'no-return'
  | 'dropped'
  | 'unknown';
