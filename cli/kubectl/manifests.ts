/**
 * The manifests `kubectl hoptrace install` applies: the ones shipped in the package (deploy/base,
 * in the order of its kustomization.yaml, as `kubectl apply -k deploy/` would), with the image
 * given in place of `hoptrace:…` (what `kustomize edit set image hoptrace=IMAGE` does).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type * as K8s from '@kubernetes/client-node';
import { HoptraceError } from '../../common/errors';

/** deploy/base of this package (compiled to dist/cli/kubectl/). */
export const DEPLOY_BASE = join(__dirname, '..', '..', '..', 'deploy', 'base');

/** A manifest object: what apply and delete need of it. */
export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; [k: string]: unknown };
  [k: string]: unknown;
}

/** Sets every container image named `hoptrace` (any tag) to `image`, in place. */
export function setImage(o: Manifest, image: string): void {
  const spec = (o['spec'] as { template?: { spec?: K8s.V1PodSpec } } | undefined)?.template?.spec;
  for (const c of [...(spec?.containers ?? []), ...(spec?.initContainers ?? [])]) {
    if (c.image !== undefined && /^hoptrace(:|@|$)/.test(c.image)) c.image = image;
  }
}

/** The objects of deploy/base, in kustomization order, with `image`. */
export function loadManifests(k8s: typeof K8s, image: string, dir = DEPLOY_BASE): Manifest[] {
  const read = (f: string): string => {
    try {
      return readFileSync(join(dir, f), 'utf8');
    } catch (e) {
      throw new HoptraceError('FILE_NOT_FOUND', e instanceof Error ? e.message : String(e), {
        where: join(dir, f),
        hint: 'the package ships deploy/: reinstall it (npm install -g)',
      });
    }
  };
  const kustomization = k8s.loadYaml<{ resources?: string[] }>(read('kustomization.yaml'));
  const out: Manifest[] = [];
  for (const file of kustomization.resources ?? []) {
    for (const o of k8s.loadAllYaml(read(file)) as (Manifest | null)[]) {
      if (o === null) continue;
      setImage(o, image);
      out.push(o);
    }
  }
  return out;
}
