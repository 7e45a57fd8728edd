-- Every new user gets a personal organization with the user's own id, in the same transaction, whichever path created the user.
create or replace function create_personal_organization() returns trigger language plpgsql as $$
begin
  insert into organizations (id, name, personal, created_at) values (new.id, new.email, true, new.created_at);
  insert into organization_members (org_id, user_id, role, created_at) values (new.id, new.id, 'owner', new.created_at);
  return new;
end
$$;
create or replace trigger users_personal_organization after insert on users
  for each row execute function create_personal_organization();
