/** The `TokenReviewer` adapter over @kubernetes/client-node's AuthenticationV1Api. */
import { AuthenticationV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { TokenReviewer } from './token-review.js';

export function kubeTokenReviewer(kubeConfig: KubeConfig): TokenReviewer {
  const api = kubeConfig.makeApiClient(AuthenticationV1Api);
  return async (token, audiences) => {
    const review = await api.createTokenReview({
      body: {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenReview',
        spec: { token: token.reveal(), audiences: [...audiences] },
      },
    });
    const s = review.status ?? {};
    return {
      authenticated: s.authenticated === true,
      ...(s.user?.username !== undefined ? { username: s.user.username } : {}),
      ...(s.user?.extra !== undefined ? { extra: s.user.extra } : {}),
      ...(s.audiences !== undefined ? { audiences: s.audiences } : {}),
      ...(s.error !== undefined ? { error: s.error } : {}),
    };
  };
}
