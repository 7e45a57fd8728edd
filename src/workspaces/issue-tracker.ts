import { InvalidInputError, UnavailableError } from '../errors.ts';

/** What registration learns from the issue tracker about a workspace's service account. */
export interface TrackerAccount {
  readonly cloudId: string;
}

/** The issue tracker as registration sees it; tests and the embedded default can stand in for it. */
export interface IssueTracker {
  /**
   * Checks that the tracker accepts the service account and returns the workspace's cloud id.
   * Throws `InvalidInputError` when the tracker refuses it, `UnavailableError` when it cannot be asked.
   */
  verifyServiceAccount(workspaceName: string, email: string, apiKey: string): Promise<TrackerAccount>;
}

/**
 * The issue tracker over HTTP, Jira Cloud style: `GET {base}/rest/api/3/myself` with basic auth
 * verifies the account, `GET {base}/_edge/tenant_info` gives the site's `cloudId`. `{workspace}`
 * in the base URL is replaced by the workspace name (`https://{workspace}.atlassian.net`).
 */
export class HttpIssueTracker implements IssueTracker {
  constructor(
    private readonly baseUrlTemplate: string,
    private readonly timeoutMs: number,
  ) {}

  async verifyServiceAccount(workspaceName: string, email: string, apiKey: string): Promise<TrackerAccount> {
    const base = this.baseUrlTemplate.replaceAll('{workspace}', encodeURIComponent(workspaceName));
    const authorization = `Basic ${Buffer.from(`${email}:${apiKey}`, 'utf8').toString('base64')}`;

    const myself = await this.get(`${base}/rest/api/3/myself`, authorization);
    if (myself.status === 401 || myself.status === 403) {
      throw new InvalidInputError(
        'The issue tracker refused this service account: check svc_acc_email and svc_acc_api_key',
        ['body', 'svc_acc_api_key'],
        'value_error',
      );
    }
    if (myself.status === 404) {
      throw new InvalidInputError('The issue tracker does not know this workspace', ['body', 'workspace_name'], 'value_error', workspaceName);
    }
    if (myself.status < 200 || myself.status >= 300) throw this.unavailable(`answered ${myself.status}`);

    const tenant = await this.get(`${base}/_edge/tenant_info`, authorization);
    if (tenant.status < 200 || tenant.status >= 300) throw this.unavailable(`answered ${tenant.status} for its tenant information`);
    const cloudId = (tenant.body as { cloudId?: unknown } | undefined)?.cloudId;
    if (typeof cloudId !== 'string' || cloudId === '' || cloudId.length > 255) {
      throw this.unavailable('gave no cloud id in its tenant information');
    }
    return { cloudId };
  }

  private async get(url: string, authorization: string): Promise<{ status: number; body: unknown }> {
    let response: Response;
    try {
      // A redirect would carry the credentials elsewhere: refused, like any other failure to ask.
      response = await fetch(url, {
        headers: { Authorization: authorization, Accept: 'application/json' },
        redirect: 'error',
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch {
      throw this.unavailable('could not be reached');
    }
    let body: unknown;
    try {
      body = response.ok ? await response.json() : await response.body?.cancel();
    } catch {
      body = undefined;
    }
    return { status: response.status, body };
  }

  private unavailable(what: string): UnavailableError {
    return new UnavailableError(`The issue tracker ${what}; retry later`);
  }
}
