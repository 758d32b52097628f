/** The inventory attribution uses: which addresses belong to which node and pod. */

export type PodRole = 'vpn' | 'backend' | 'proxy' | 'other';

export interface InventoryPod {
  ip: string;
  node: string;
  role: PodRole;
}

export interface Inventory {
  /** node name -> every address of the node (uplinks, CNI bridge/gateway, tunnel devices). */
  nodes: Record<string, string[]>;
  pods: Record<string, InventoryPod>;
}
