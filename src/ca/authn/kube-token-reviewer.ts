/**
 * The `TokenReviewer` adapter over @kubernetes/client-node's AuthenticationV1Api. Each review is
 * abandoned (its connection closed) after `timeoutMs`: a hung API server fails the caller's
 * authentication quickly (ERR_CA_AUTHN_BACKEND upstream) instead of holding its request and a
 * socket until the API server answers.
 */
import { AuthenticationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { withDeadline } from '../../core/deadline.js';
import { abortableApi } from '../../kube/abortable-http.js';
import { TOKEN_REVIEW_TIMEOUT_MS, type TokenReviewer } from './token-review.js';

export function kubeTokenReviewer(kubeConfig: KubeConfig, options: { readonly timeoutMs?: number } = {}): TokenReviewer {
  return async (token, audiences) => {
    const review = await withDeadline(options.timeoutMs ?? TOKEN_REVIEW_TIMEOUT_MS, { what: 'TokenReview' }, (signal) =>
      abortableApi(kubeConfig, AuthenticationV1Api, signal).createTokenReview({
        body: {
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenReview',
          spec: { token: token.reveal(), audiences: [...audiences] },
        },
      }),
    );
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
